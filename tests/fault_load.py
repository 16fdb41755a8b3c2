"""Load for the fault tests: producers, an offset consumer and a pop consumer driving a gateway through the SDK while
faults come and go, each keeping a history the test checks afterwards (`Histories.check`).

Every answer the SDK's HTTP client gets is counted by status (a 5xx answered is what the tests look for, though the
SDK retries it away), every acknowledged message is kept with where it was stored, and the offset consumer checks
as it reads that each queue's messages come at the offsets it asked for, one after another: a reader that skips
what the store holds is caught at the read that skipped.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq import Consumer, Producer, SimpleConsumer
from tidemq.client import HttpClient, Response
from tidemq.producer import outgoing

PRODUCE_BATCH = 5
SLOW_S = 5.0  # an answer (beyond its long poll) slower than this is kept in the history


class CountingClient(HttpClient):
    """The SDK's client, counting every answer it gets by status (and answers that never came, as None)."""

    def __init__(self, url: str, statuses: collections.Counter, fives: list, slow: list, **options) -> None:
        super().__init__(url, **options)
        self.statuses, self.fives, self.slow = statuses, fives, slow

    def send(self, method: str, path: str, **options) -> Response:
        started = time.monotonic()
        try:
            response = super().send(method, path, **options)
        except OSError:
            self.statuses[None] += 1
            self.slow.append((started, time.monotonic() - started, None, method, path))
            raise
        took = time.monotonic() - started
        if took > SLOW_S:
            self.slow.append((started, took, response.status_code, method, path))
        self.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.fives.append((time.monotonic(), response.status_code, method, path, response.text[:200]))
        return response


@dataclass
class Histories:
    """What each worker saw."""

    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # body -> (queue, offset)
    failed_sends: int = 0
    read: dict[int, list[tuple[int, str]]] = field(default_factory=lambda: collections.defaultdict(list))
    skips: list[tuple[int, int, int]] = field(default_factory=list)  # queue, offset asked for, offset answered
    popped: collections.Counter = field(default_factory=collections.Counter)  # body -> deliveries acked
    statuses: collections.Counter = field(default_factory=collections.Counter)
    fives: list = field(default_factory=list)  # (when, status, method, path, body) of each 5xx answered
    slow: list = field(default_factory=list)  # (when, seconds, status, method, path) of answers slower than SLOW_S
    errors: list[str] = field(default_factory=list)  # what the workers' calls raised, after the SDK's retries
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, stored: dict[int, list[str]]) -> None:
        """Nothing acknowledged lost, nothing stored at an offset it was not acknowledged at, no 5xx, no skip:
        `stored` is each queue's bodies in offset order, read after the run."""
        assert self.fives == [], self.fives[:10]
        assert self.skips == [], self.skips[:10]
        where = {body: (queue, offset) for queue, bodies in stored.items() for offset, body in enumerate(bodies)}
        lost = [body for body in self.acked if body not in where]
        assert lost == [], f"{len(lost)} acknowledged messages not stored: {lost[:10]}"
        moved = [(body, at, where[body]) for body, at in self.acked.items() if where[body] != at]
        assert moved == [], f"stored elsewhere than acknowledged: {moved[:10]}"


class Load:
    """Producers, an offset consumer and a pop consumer on `topic` (queues `queues`) of the gateway at `url`, run on
    threads until `stop`."""

    def __init__(self, url: str, topic: str, queues: int, producers: int = 2, client_options: dict | None = None):
        self.url, self.topic, self.queues, self.producers = url, topic, queues, producers
        self.histories = Histories()
        self.stopping = threading.Event()
        self.producing = threading.Event()
        self.producing.set()
        self.options = {"retries": 8, "backoff_s": 0.2, "max_backoff_s": 5.0, "timeout_s": 30.0} | (
            client_options or {}
        )
        self.threads: list[threading.Thread] = []

    def client(self) -> CountingClient:
        h = self.histories
        return CountingClient(self.url, h.statuses, h.fives, h.slow, **self.options)

    def start(self) -> None:
        workers: list[Callable[[], None]] = [self._producer(n) for n in range(self.producers)]
        workers += [self._offset_consumer, self._pop_consumer]
        for worker in workers:
            thread = threading.Thread(target=self._guarded(worker), daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop_producing(self) -> None:
        self.producing.clear()

    def stop(self, timeout_s: float = 120) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout_s)
        assert not any(thread.is_alive() for thread in self.threads), "a worker did not stop"

    def _guarded(self, worker: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self.stopping.is_set():
                try:
                    worker()
                    return
                except Exception as error:  # the SDK gave up on a call: noted, and the worker starts again
                    with self.histories.lock:
                        self.histories.errors.append(
                            f"{worker.__name__ if hasattr(worker, '__name__') else worker}: "
                            f"{type(error).__name__}: {error}"
                        )
                    time.sleep(0.5)

        return run

    def _producer(self, number: int) -> Callable[[], None]:
        sent = iter(range(10**9))

        def produce() -> None:
            with Producer(self.topic, client=self.client()) as producer:
                while not self.stopping.is_set() and self.producing.is_set():
                    n = next(sent)
                    queue = n % self.queues
                    bodies = [f"p{number}-{n}-{k}" for k in range(PRODUCE_BATCH)]
                    try:
                        results = producer.send_batch([outgoing(body, queue=queue) for body in bodies])
                    except Exception:
                        with self.histories.lock:
                            self.histories.failed_sends += 1
                        raise
                    with self.histories.lock:
                        for body, result in zip(bodies, results, strict=True):
                            self.histories.acked[body] = (result.queue, result.offset)

        produce.__name__ = f"producer {number}"
        return produce

    def _offset_consumer(self) -> None:
        with Consumer(self.topic, "offsets", client=self.client(), stream=False) as consumer:
            while not self.stopping.is_set():
                before = consumer.positions
                messages = consumer.poll(max_messages=100, wait_ms=500)
                if messages:
                    queue = messages[0].queue
                    expected = before[queue]
                    if messages[0].queue_offset != expected:
                        with self.histories.lock:
                            self.histories.skips.append((queue, expected, messages[0].queue_offset))
                    with self.histories.lock:
                        for message in messages:
                            self.histories.read[queue].append((message.queue_offset, message.body.decode()))
                consumer.commit()

    def _pop_consumer(self) -> None:
        consumer = SimpleConsumer(self.topic, "pops", client=self.client(), invisible_ms=20_000)
        with consumer:
            pending = []
            while not self.stopping.is_set():
                batch = consumer.ack_and_receive(pending, max_messages=32, wait_ms=500)
                with self.histories.lock:
                    for received in batch.received:
                        self.histories.popped[received.message.body.decode()] += 1
                pending = list(batch.received)
