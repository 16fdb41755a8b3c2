"""TransactionProducer: transactional messages (RocketMQ's TransactionMQProducer / 5.x `Producer` with a
`TransactionChecker`). A half message is stored and invisible until the producer commits it (it becomes visible once,
with its id) or rolls it back (it never does).

    def checker(check: TransactionCheck) -> Resolution:        # the broker asks: what became of this one?
        return Resolution.COMMIT if orders.paid(check.message.keys[0]) else Resolution.ROLLBACK

    with TransactionProducer("orders", group="order-service", checker=checker) as producer:
        half = producer.send(b"order 1001 paid", keys=["order-1001"])
        orders.mark_paid("order-1001")                          # the local transaction
        half.commit()

A half message not ended within the server's transaction timeout (6 s) is checked back: the broker never calls the
producer; a thread of the producer long-polls its group's check-backs of the topic and answers each with what
`checker` returns (an exception or None: unknown, asked again after the check interval). After the server's most
check-backs (15) without a commit or rollback the half message is rolled back. Any producer of the group may answer
any check-back, and any process may end any transaction: the state is the server's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum

from tidemq_protocol import codec
from tidemq_protocol.api.transactions import (
    EndTransactionRequest,
    HalfMessageRequest,
    TransactionCheck,
    TransactionChecks,
    TransactionView,
)

from .api_client import ApiClient, model_of
from .client import HttpClient, segment
from .producer import new_send_key

log = logging.getLogger("tidemq.transactions")
CHECK_WAIT_MS = 10_000  # a check-back poll waits this long at most (the server's TIDEMQ_MAX_GET_WAIT_MS bounds it)
MAX_CHECKS = 16
RETRY_PAUSE_S = 1.0  # after a failed poll (the server down, say) the checker thread waits this long


class Resolution(StrEnum):
    """A producer's answer: commit, roll back, or unknown (not yet: ask again later)."""

    COMMIT = "commit"
    ROLLBACK = "rollback"
    UNKNOWN = "unknown"


Checker = Callable[[TransactionCheck], Resolution | str | None]


class HalfMessage:
    """A half message sent: its transaction's `msg_id` (the committed message's id) and queue; end it once."""

    def __init__(self, producer: TransactionProducer, sent: TransactionView) -> None:
        self.producer, self.sent = producer, sent
        self.msg_id, self.queue = sent.msg_id, sent.queue

    def commit(self) -> TransactionView:
        return self.producer.end(self.msg_id, Resolution.COMMIT)

    def rollback(self) -> TransactionView:
        return self.producer.end(self.msg_id, Resolution.ROLLBACK)


class TransactionProducer(ApiClient):
    """Sends half messages to `topic` as producer group `group`, and with a `checker` answers the group's
    check-backs of the topic from a thread of its own (until `close`)."""

    def __init__(
        self,
        topic: str,
        group: str,
        checker: Checker | None = None,
        *,
        url: str | None = None,
        client: HttpClient | None = None,
        check_wait_ms: int = CHECK_WAIT_MS,
    ) -> None:
        super().__init__(url, client=client)
        self.topic, self.group, self.checker = topic, group, checker
        self.check_wait_ms = check_wait_ms
        self._path = f"/v1/topics/{segment(topic)}/transactions"
        self._checks_path = f"/v1/producer-groups/{segment(group)}/topics/{segment(topic)}/checks"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if checker is not None:
            self._thread = threading.Thread(target=self._answer_checks, name=f"tidemq-checker-{group}", daemon=True)
            self._thread.start()

    def send(
        self,
        body: bytes | str,
        *,
        keys: Sequence[str] = (),
        tag: str | None = None,
        properties: Mapping[str, str] | None = None,
        queue: int | None = None,
        sharding_key: str | None = None,
    ) -> HalfMessage:
        """Send a half message (`body`: bytes, or text sent as UTF-8); invisible until committed. It is sent with an
        idempotency key of its own, the same on its retries: prepared once, however often it is sent."""
        fields = {"keys": list(keys), "tag": tag, "properties": dict(properties or {})}
        request = HalfMessageRequest.of(
            body, **fields, queue=queue, sharding_key=sharding_key, producer_group=self.group
        )
        headers = {codec.IDEMPOTENCY_KEY_HEADER: new_send_key()}  # the same on each retry of `request`
        response = self._client.request("POST", self._path, json=request.model_dump(), headers=headers)
        sent = model_of(TransactionView, response)
        return HalfMessage(self, sent)

    def end(self, msg_id: str, resolution: Resolution | str, check: int | None = None) -> TransactionView:
        """Commit, roll back or answer unknown (`check`: the check-back this answers). Sent again, an end changes
        nothing; the opposite of how it ended raises TransactionConflict."""
        request = EndTransactionRequest(resolution=Resolution(resolution).value, check=check)
        body = request.model_dump(exclude_none=True)
        return model_of(TransactionView, self._client.request("POST", f"{self._path}/{msg_id}", json=body))

    def commit(self, msg_id: str) -> TransactionView:
        return self.end(msg_id, Resolution.COMMIT)

    def rollback(self, msg_id: str) -> TransactionView:
        return self.end(msg_id, Resolution.ROLLBACK)

    def take_checks(self, wait_ms: int = 0, max_checks: int = MAX_CHECKS) -> list[TransactionCheck]:
        """The group's open check-backs of the topic, each now this caller's to answer; waits up to `wait_ms`."""
        params = {"wait_ms": wait_ms, "max_checks": max_checks}
        timeout_s = self._client.timeout_s + wait_ms / 1000
        response = self._client.request("POST", self._checks_path, params=params, timeout_s=timeout_s)
        return model_of(TransactionChecks, response).checks

    def answer(self, check: TransactionCheck) -> TransactionView:
        """Answer one check-back with what the checker says (unknown if it fails or says nothing)."""
        try:
            resolution = Resolution(self.checker(check) or Resolution.UNKNOWN)
        except Exception:
            log.exception("the checker failed on %s: answered unknown", check.transaction.msg_id)
            resolution = Resolution.UNKNOWN
        return self.end(check.transaction.msg_id, resolution, check.check)

    def _answer_checks(self) -> None:
        while not self._stop.is_set():
            try:
                for check in self.take_checks(self.check_wait_ms):
                    if self._stop.is_set():
                        return  # left unanswered: asked again after the check interval
                    self.answer(check)
            except Exception:
                log.warning("taking check-backs of %s failed; trying again", self.topic, exc_info=True)
                self._stop.wait(RETRY_PAUSE_S)

    def close(self) -> None:
        """Stop answering check-backs (an unanswered one is asked again later), then close the client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._client.timeout_s + self.check_wait_ms / 1000)
        super().close()
