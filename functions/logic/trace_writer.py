"""The buffered writer of trace records: what a request hands over costs it one append, and a flusher thread turns
what waits into `%TRACE%` records (trace.py owns their format) and puts them, a put per flush.

The request thread only appends its batch's queues and offsets (`Pending`): the rest of the work a message (runs,
buckets, JSON) is the flusher's, once per flush.
The flusher runs only while something waits, so a closed store leaves no thread behind. What waits is bounded
(TIDEMQ_TRACE_BUFFER_EVENTS); past that, new events are dropped and counted (`dropped`), never a request slowed
or failed. A put is cut to the store's batch limits; a put that fails is logged and its records dropped: trace is
weaker than messages (trace.py's docstring says how much)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from tidemq_protocol.errors import TopicExists, TopicNotFound
from tidemq_protocol.message import Message
from tidemq_store import MessageStore, TopicConfig
from tidemq_store.errors import StoreClosed

TOPIC_CACHE_S = 1.0
"""How long a recorder trusts whether a topic is traced: an opt-out (or back in) takes effect within this."""

log = logging.getLogger("tidemq.trace")


class Pending(NamedTuple):
    """Events of one batch waiting to be written: what kind (`trace.py` reads `items` by it), when (ns), of which
    topic and group (None: no group), what the batch's events hold, how many they are, and the attributes they all
    share. `items` holds no object the garbage collector tracks, where it can (an `array` of ints, a `str`): what
    waits for a flush must not make every collection meanwhile longer (measured: it cost more than the flush)."""

    kind: str
    time_unix_nano: int
    topic: str
    group: str | None
    items: Any
    events: int
    common: dict[str, str | int]


class TraceRecorder:
    """A store's trace events waiting to be put, and the flusher that puts them (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        encode: Callable[[list[Pending]], list[Message]],
        trace_topic: TopicConfig,
        flush_ms: int,
        buffer_events: int,
        batch_messages: int,
        batch_bytes: int,
    ) -> None:
        self.store, self.encode, self.trace_topic = store, encode, trace_topic
        self.flush_s, self.buffer_events = flush_ms / 1000, buffer_events
        self.batch_messages, self.batch_bytes = batch_messages, batch_bytes
        self._waiting: list[Pending] = []
        self._events = 0
        self._lock, self._putting = threading.Lock(), threading.Lock()
        self._flusher: threading.Thread | None = None
        self._topics: dict[str, tuple[bool, float]] = {}
        self.dropped = 0
        self.busy_s = 0.0  # CPU time the flushes took, all told (what bench/trace.py reports)

    def topic_traced(self, topic: str, traced: Callable[[TopicConfig], bool]) -> bool:
        """Whether `topic` is traced (`traced` of its config), as known within TOPIC_CACHE_S."""
        known = self._topics.get(topic)
        now = time.monotonic()
        if known is not None and known[1] > now:
            return known[0]
        try:
            answer = traced(self.store.cached_topic(topic))
        except TopicNotFound:
            answer = False
        self._topics[topic] = (answer, now + TOPIC_CACHE_S)
        return answer

    def add(self, pending: Pending) -> None:
        with self._lock:
            if self._events + pending.events > self.buffer_events:
                self.dropped += pending.events
                return
            self._waiting.append(pending)
            self._events += pending.events
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_while_waiting, name="trace-flush", daemon=True)
                self._flusher.start()

    def _flush_while_waiting(self) -> None:
        while True:
            time.sleep(self.flush_s)
            self.flush()
            with self._lock:
                if not self._waiting:
                    self._flusher = None
                    return

    def flush(self) -> None:
        """Write every event waiting now."""
        with self._putting:
            with self._lock:
                waiting, self._waiting, self._events = self._waiting, [], 0
            if not waiting:
                return
            began = time.thread_time()
            try:
                for chunk in self._chunks(self.encode(waiting)):
                    self._put(chunk)
            except StoreClosed:
                pass
            except Exception:  # trace never fails what it records
                log.exception("dropped the trace events of %d batches", len(waiting))
            self.busy_s += time.thread_time() - began

    def _chunks(self, messages: list[Message]) -> list[list[Message]]:
        """`messages` in puts within the store's batch limits (a record's size as its body's, with room to spare)."""
        chunks: list[list[Message]] = [[]]
        size = 0
        for message in messages:
            if chunks[-1] and (len(chunks[-1]) == self.batch_messages or size + len(message.body) > self.batch_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append(message)
            size += len(message.body)
        return [chunk for chunk in chunks if chunk]

    def _put(self, messages: list[Message]) -> None:
        try:
            self.store.put(self.trace_topic.name, messages)
        except TopicNotFound:
            with contextlib.suppress(TopicExists):
                self.store.create_topic(self.trace_topic)
            self.store.put(self.trace_topic.name, messages)
