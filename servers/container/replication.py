"""Master/slave replication between containers (RIP-31's cross-deployed pairs; RocketMQ's HA service, over HTTP).

A slave pulls: `GET /container/v1/brokers/<name>/replica?from=<position>` on its master's container, signed as
`haMasterAccessKey`, answers the next chunk of the master's commit log (`tidemq_store.embedded.replica` owns the
format), which the slave writes where the master wrote it, indexes and makes durable, then asks from where its log
now ends. Asking from a position says the slave holds everything below it: that is the slave's acknowledgement. An
ask waits up to `wait_ms` for data the slave does not have yet (a long poll), so a put reaches the slave at once.

A master keeps what its slave last said (`MasterReplication`). Under SYNC_MASTER a put is answered once the slave
holds it, as RocketMQ answers: `SEND_OK`; if the slave has not got it within `syncFlushTimeout`,
`FLUSH_SLAVE_TIMEOUT`; with no slave heard from within `haHousekeepingInterval`, `SLAVE_NOT_AVAILABLE` at once. The
message is stored on the master in all three cases, and the answer says how far it got in the
`X-TideMQ-Send-Status` header; only `SEND_OK` says the slave has it. Under ASYNC_MASTER every put is `SEND_OK` at once
and the slave follows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum

import httpx

from tidemq.credentials import Credentials
from tidemq.httpx_auth import RequestSigner
from tidemq_protocol.errors import TideMQError
from tidemq_store.embedded import EmbeddedMessageStore
from tidemq_store.embedded.replica import ReplicaChunk
from tidemq_store.errors import StoreClosed
from tidemq_store.hot import StoredBatch
from tidemq_store.threads import background_thread

log = logging.getLogger("tidemq.replication")
CHUNK_BYTES = 4 * 1024 * 1024
POLL_WAIT_MS = 1000


class SendStatus(StrEnum):
    """RocketMQ's SendStatus: how far a stored put got (worst last)."""

    SEND_OK = "SEND_OK"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendOutcome:
    """Where a request's puts note how far they got; the container sends it back as a header."""

    status: SendStatus | None = None

    def note(self, status: SendStatus) -> None:
        order = list(SendStatus)
        if self.status is None or order.index(status) > order.index(self.status):
            self.status = status


_outcome: ContextVar[SendOutcome | None] = ContextVar("tidemq_send_outcome", default=None)


@contextmanager
def noting_outcome() -> Iterator[SendOutcome]:
    """Collect the send status of the puts made in this context (and in copies of it: the handler's thread)."""
    outcome = SendOutcome()
    token = _outcome.set(outcome)
    try:
        yield outcome
    finally:
        _outcome.reset(token)


class MasterReplication:
    """A master's side: what its slave holds, and the wait of a SYNC_MASTER put for it."""

    def __init__(self, store: EmbeddedMessageStore, synchronous: bool, timeout_ms: int, housekeeping_ms: int) -> None:
        self.store, self.synchronous = store, synchronous
        self.timeout_s, self.housekeeping_s = timeout_ms / 1000, housekeeping_ms / 1000
        self.slave_position = 0  # everything below it is on the slave
        self.slave_seen: float | None = None  # time.monotonic() of the slave's last ask
        self._changed = threading.Condition()
        store.add_put_listener(self.on_put)

    def slave_alive(self) -> bool:
        seen = self.slave_seen
        return seen is not None and time.monotonic() - seen < self.housekeeping_s

    def slave_asked(self, position: int) -> None:
        with self._changed:
            self.slave_position, self.slave_seen = position, time.monotonic()
            self._changed.notify_all()

    def wait_for_data(self, position: int, timeout_s: float) -> None:
        """Return once this log goes past `position`, or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.store.written_position <= position and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)

    def on_put(self, stored: StoredBatch) -> None:
        """After every put (in the putting thread): wake the slave's long poll; under SYNC_MASTER, wait for the
        slave to hold the batch and note how far it got."""
        end = stored.end  # the whole append: a batch with a SEND_KEY record is whole with it
        with self._changed:
            self._changed.notify_all()
            if not self.synchronous:
                status = SendStatus.SEND_OK
            elif not self.slave_alive():
                status = SendStatus.SLAVE_NOT_AVAILABLE
            else:
                deadline = time.monotonic() + self.timeout_s
                while self.slave_position < end and (left := deadline - time.monotonic()) > 0:
                    self._changed.wait(left)
                status = SendStatus.SEND_OK if self.slave_position >= end else SendStatus.FLUSH_SLAVE_TIMEOUT
        outcome = _outcome.get()
        if outcome is not None:
            outcome.note(status)

    def describe(self) -> dict:
        seen = self.slave_seen
        return {
            "synchronous": self.synchronous,
            "slave_position": self.slave_position,
            "slave_lag_bytes": max(0, self.store.written_position - self.slave_position) if seen else None,
            "slave_seen_ms_ago": None if seen is None else int((time.monotonic() - seen) * 1000),
            "slave_alive": self.slave_alive(),
        }


@dataclass
class SlaveState:
    connected: bool = False
    master_written: int | None = None
    error: str | None = None


class SlaveReplicator:
    """A slave's side: a thread pulling its master's commit log (see the module docstring) through the container's
    one outbound client, started in the broker's context (its log lines are the broker's)."""

    def __init__(
        self, store: EmbeddedMessageStore, client: httpx.Client, master: str, broker: str, credentials: Credentials
    ) -> None:
        self.store, self.client = store, client
        self.url = f"{master.rstrip('/')}/container/v1/brokers/{broker}/replica"
        self.auth = RequestSigner(credentials)
        self.state = SlaveState()
        self._stop = threading.Event()
        self._thread = background_thread(self._run, f"replica-{broker}")

    def start(self) -> SlaveReplicator:
        self._thread.start()
        return self

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                self._pull()
                backoff = 0.1
            except StoreClosed:
                return
            except (httpx.HTTPError, TideMQError, OSError) as error:
                self._failed(f"{type(error).__name__}: {error}")
                self._stop.wait(backoff)
                backoff = min(2.0, backoff * 2)

    def _pull(self) -> None:
        position = self.store.written_position
        params = {"from": position, "max_bytes": CHUNK_BYTES, "wait_ms": POLL_WAIT_MS}
        response = self.client.get(self.url, params=params, auth=self.auth, timeout=POLL_WAIT_MS / 1000 + 10)
        if response.status_code != 200:
            raise TideMQError(f"the master answered {response.status_code}: {response.text[:300]}")
        chunk = ReplicaChunk.decode(response.content)
        self.store.apply_replica(chunk)
        if not self.state.connected:
            log.info("replicating from %s at position %d", self.url, chunk.position)
        self.state = SlaveState(True, chunk.master_written, None)

    def _failed(self, reason: str) -> None:
        if self.state.connected or self.state.error != reason:
            log.warning("replication from %s failed: %s; trying again", self.url, reason)
        self.state = SlaveState(False, self.state.master_written, reason)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def describe(self) -> dict:
        written = self.store.written_position
        state = self.state
        return {
            "master": self.url.rsplit("/container/", 1)[0],
            "connected": state.connected,
            "position": written,
            "lag_bytes": None if state.master_written is None else max(0, state.master_written - written),
            "error": state.error,
        }
