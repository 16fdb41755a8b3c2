"""Load for the fault tests: producers and consumers of every kind driving a gateway while faults come and go, each
keeping a history that `Load.check` reads afterwards.

    HTTP (the SDK):  two producers (batches of 5, each with its idempotency key, as the SDK sends them), an offset
                     consumer (poll, commit), a pop consumer (receive, ack), and a push group to a webhook; a
                     producer of delay messages (a DELAY topic), one of transactions (half messages committed, every
                     fifth rolled back, a checker answering the check-backs of those whose end was not answered),
                     and a KV writer (compare-and-set puts of a few keys)
    gRPC:            the unmodified RocketMQ 5 client (tests/rocketmq_client.py, in processes of their own): a
                     producer, and a simple consumer that receives and acks, on a topic of their own (the client acks
                     one message a call: it could not keep up with the HTTP producers too on the moto server)

Every answer the SDK's HTTP client gets is counted by status (a 5xx other than 503 is what the tests look for,
though the SDK retries it away), every acknowledged message is kept with where it was stored, and the offset
consumer checks as it reads that each queue's messages come at the offsets it asked for: a reader that skips what
the store holds is caught at the read that skipped. Acknowledgements are counted per second, so that how long the
producers took to come back after a fault can be read off.
"""

from __future__ import annotations

import base64
import collections
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.push_targets import Webhook
from tidemq import KV, Admin, Consumer, Producer, Resolution, SimpleConsumer, TransactionProducer
from tidemq.client import HttpClient, Response
from tidemq.producer import outgoing

PRODUCE_BATCH = 5
DELAY_MS = 1000  # the delay messages' delay
POP_INVISIBLE_MS = 4000
"""The pop consumers' invisible time (the gateway's TIDEMQ_POP_MIN_INVISIBLE_MS must allow it): a message whose
delivery's answer a fault lost comes back this long after."""
KV_KEYS = 8
SIDE_PAUSE_S = 0.2  # between the delay producer's, the transaction producer's and the KV writer's calls
PRODUCE_PAUSE_S = 0.1  # between a producer's batches: at most 50 msg/s each, which every consumer here keeps up with
SLOW_S = 5.0  # an answer (beyond its long poll) slower than this is kept in the history
CLIENT = Path(__file__).resolve().parent / "rocketmq_client.py"
GRPC_MESSAGES = 100_000  # more than a run sends: the producer is stopped when the run stops producing
GRPC_BUGS = ("INTERNAL_SERVER_ERROR", "INTERNAL_ERROR")  # what a gRPC client must never be answered


class CountingClient(HttpClient):
    """The SDK's client, counting every answer it gets by status (and answers that never came, as None)."""

    def __init__(self, url: str, histories: Histories, **options) -> None:
        super().__init__(url, **options)
        self.histories = histories

    def send(self, method: str, path: str, **options) -> Response:
        started = time.monotonic()
        try:
            response = super().send(method, path, **options)
        except OSError:
            self.histories.answered(None, started, method, path, "")
            raise
        self.histories.answered(response.status_code, started, method, path, response.text[:200])
        return response


@dataclass
class Histories:
    """What each worker saw (`lock` guards every field)."""

    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # body -> (queue, offset)
    acked_at: collections.Counter = field(default_factory=collections.Counter)  # second of the run -> messages
    read: set[str] = field(default_factory=set)
    skips: list[tuple[int, int, int]] = field(default_factory=list)  # queue, offset asked for, offset answered
    popped: collections.Counter = field(default_factory=collections.Counter)  # body -> deliveries
    delayed: set[str] = field(default_factory=set)  # bodies of acknowledged delay messages
    committed: set[str] = field(default_factory=set)  # bodies of transactions whose commit was answered
    rolled_back: set[str] = field(default_factory=set)  # ... whose rollback was answered
    kv: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (value, version) of its last answered put
    grpc_sent: dict[str, str] = field(default_factory=dict)  # message id -> body
    acked_when: dict[str, float] = field(default_factory=dict)  # body -> when acknowledged (monotonic), HTTP
    grpc_when: dict[str, float] = field(default_factory=dict)  # ... gRPC
    grpc_received: set[str] = field(default_factory=set)  # bodies
    grpc_errors: list[dict] = field(default_factory=list)
    statuses: collections.Counter = field(default_factory=collections.Counter)
    bugs: list = field(default_factory=list)  # (when, status, method, path, body) of each 5xx but 503
    slow: list = field(default_factory=list)  # (when, seconds, status, method, path) of answers slower than SLOW_S
    errors: list[str] = field(default_factory=list)  # what the workers' calls raised, after the SDK's retries
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, status: int | None, started: float, method: str, path: str, body: str) -> None:
        took = time.monotonic() - started
        with self.lock:
            self.statuses[status] += 1
            if status is not None and status >= 500 and status != 503:
                self.bugs.append((started - self.started, status, method, path, body))
            if status is None or (took > SLOW_S and "wait_ms" not in path):
                self.slow.append((started - self.started, round(took, 2), status, method, path))

    def note(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)

    def summary(self) -> dict:
        with self.lock:
            return {
                "acknowledged": len(self.acked) + len(self.grpc_sent),
                "statuses": {str(status): n for status, n in sorted(self.statuses.items(), key=str)},
                "bugs": len(self.bugs),
                "skips": len(self.skips),
                "grpc_errors": collections.Counter(e.get("code") for e in self.grpc_errors),
                "worker_errors": len(self.errors),
                "worker_errors_seen": self.errors[:3],
                "unanswered_or_slow": self.slow[:5],
            }


class Load:
    """The workers on `topic` (`queues` queues) of the gateway at `url` (`grpc`: its gRPC proxy's host:port and the
    credentials the clients sign with, None: no gRPC workers), run on threads and processes until `stop`; `home`
    holds the gRPC clients' files."""

    def __init__(
        self,
        url: str,
        topic: str,
        queues: int,
        home: Path,
        grpc: tuple[str, str, str] | None = None,
        producers: int = 2,
    ) -> None:
        self.url, self.topic, self.queues, self.home, self.grpc = url, topic, queues, home, grpc
        self.producers = producers
        self.histories = Histories()
        self.stopping, self.producing = threading.Event(), threading.Event()
        self.producing.set()
        self.options = {"retries": 10, "backoff_s": 0.2, "max_backoff_s": 5.0, "timeout_s": 30.0}
        self.threads: list[threading.Thread] = []
        self.processes: list[subprocess.Popen] = []
        self.webhook = Webhook()
        self.delay_topic, self.tx_topic, self.grpc_topic = f"{topic}-delay", f"{topic}-tx", f"{topic}-grpc"

    def client(self) -> CountingClient:
        return CountingClient(self.url, self.histories, **self.options)

    def start(self) -> Load:
        admin = Admin(client=self.client())
        for group in ("offsets", "pops", "pushed", "grpc"):
            admin.create_group(group)
        admin.create_topic(self.delay_topic, queues=2, message_type="DELAY")
        admin.create_topic(self.grpc_topic, queues=2)
        admin.create_topic(self.tx_topic, queues=2, message_type="TRANSACTION")
        KV(client=self.client()).create_namespace(self.topic)
        self.webhook.__enter__()
        admin.set_push("pushed", self.topic, self.webhook.url, batch_size=32)
        workers: list[Callable[[], None]] = [self._producer(n) for n in range(self.producers)]
        workers += [self._offset_consumer, self._pop_consumer, self._delay_producer, self._transactions, self._kv]
        for worker in workers:
            self._thread(self._guarded(worker))
        if self.grpc is not None:
            spec = {"role": "drain", "group": "grpc", "invisible_s": 20}
            self._grpc_client(spec, self._grpc_consumed)
            messages = {"prefix": "g-", "count": GRPC_MESSAGES, "until_sent": True, "pause_s": 0.1}
            self._grpc_client({"role": "producer", "numbered": messages, "deadline_s": 3600}, self._grpc_sent)
        return self

    # ---- running ---------------------------------------------------------------------------------------------

    def stop_producing(self) -> None:
        """The producers stop (the gRPC one is stopped, sending nothing more); the consumers go on."""
        self.producing.clear()
        for process in self.processes[1:]:  # the producer
            process.terminate()

    def drained(self, timeout_s: float) -> float:
        """Wait until every consumer has every acknowledged message; how long that took (AssertionError: not within
        `timeout_s`, saying which consumer lacks how many)."""
        started = time.monotonic()
        while (missing := self.missing()) and time.monotonic() - started < timeout_s:
            time.sleep(0.2)
        assert not missing, (
            f"consumers lack acknowledged messages {timeout_s} s after producing stopped: {missing}; "
            f"{self.histories.summary()}; the workers' last errors: {self.histories.errors[-5:]}"
        )
        return time.monotonic() - started

    def caught_up(self, since: float, timeout_s: float, fault: str = "") -> float:
        """Wait until the HTTP consumers have every message acknowledged before `since` (monotonic); how long after
        `since` that was (AssertionError: not within `timeout_s`, saying which consumer lacks how many). The gRPC
        consumer, which acks one message a call and is the slowest here, is waited for at the end (`drained`)."""
        while (missing := self.missing(since, grpc=False)) and time.monotonic() - since < timeout_s:
            time.sleep(0.2)
        assert not missing, (
            f"consumers lack messages acknowledged before {fault or 'a fault'} ended, {timeout_s} s on: {missing}"
        )
        return time.monotonic() - since

    def missing(self, before: float | None = None, grpc: bool = True) -> dict[str, int]:
        """How many acknowledged messages (`before`: acknowledged before that moment) each consumer (`grpc`: the
        gRPC one too) has not had yet (those that lack none left out)."""
        h = self.histories
        with h.lock:
            acked = [body for body, at in h.acked_when.items() if before is None or at < before]
            sent = [body for body, at in h.grpc_when.items() if before is None or at < before]
            lacking = {
                "offset consumer": sum(1 for body in acked if body not in h.read),
                "pop consumer": sum(1 for body in acked if body not in h.popped),
                "grpc consumer": sum(1 for body in sent if body not in h.grpc_received) if grpc else 0,
            }
        pushed = set(self.webhook.bodies_received())
        lacking["push group"] = sum(1 for body in acked if body not in pushed)
        return {name: count for name, count in lacking.items() if count}

    def recovered_after(self, cleared_at: float, baseline: float, timeout_s: float, fault: str = "") -> float:
        """Seconds from `cleared_at` (monotonic) to the first second in which the producers' acknowledgements came at
        half the `baseline` rate (msg/s) or more (AssertionError: not within `timeout_s`)."""
        deadline = cleared_at + timeout_s
        while time.monotonic() < deadline:
            for second in self._seconds_from(cleared_at):
                if self.histories.acked_at[second] >= baseline / 2:
                    return max(0.0, second - (cleared_at - self.histories.started))
            time.sleep(0.2)
        seconds = [self.histories.acked_at[s] for s in self._seconds_from(cleared_at)]
        raise AssertionError(
            f"producers did not come back to half of {baseline:.0f} msg/s within {timeout_s} s after "
            f"{fault or 'a fault'}: {seconds} msg/s; "
            f"{self.missing(cleared_at, grpc=False)} lacking; the workers' last errors: {self.histories.errors[-3:]}"
        )

    def _seconds_from(self, since: float) -> Iterator[int]:
        first, last = int(since - self.histories.started), int(time.monotonic() - self.histories.started)
        return iter(range(first, last))  # whole seconds only: the current one is still counting

    def rate(self, since: float, until: float) -> float:
        """The producers' acknowledged messages a second over [since, until) (monotonic)."""
        first, last = int(since - self.histories.started), int(until - self.histories.started)
        return sum(self.histories.acked_at[s] for s in range(first, last)) / max(1, last - first)

    def stop(self, timeout_s: float = 120) -> None:
        self.stopping.set()
        self.producing.clear()
        for process in self.processes:
            if process.stdin is not None:
                process.stdin.close()  # the drain consumer stops
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for thread in self.threads:
            thread.join(timeout_s)
        self.webhook.__exit__(None, None, None)
        assert not any(thread.is_alive() for thread in self.threads), "a worker did not stop"

    # ---- the checks --------------------------------------------------------------------------------------------

    def check(self) -> None:
        """No 5xx but 503 answered, no gRPC client answered an internal error, no read skipped, and every
        acknowledged message stored once where it was acknowledged (read back over HTTP after the run)."""
        h = self.histories
        assert h.bugs == [], h.bugs[:10]
        assert [e for e in h.grpc_errors if e.get("code") in GRPC_BUGS] == [], h.grpc_errors[:10]
        assert h.skips == [], h.skips[:10]
        stored = self.stored()
        where = {body: at for at, body in stored.items()}
        assert len(where) == len(stored), "a message is stored twice"
        lost = [body for body in h.acked if body not in where]
        assert lost == [], f"{len(lost)} acknowledged messages are not stored: {lost[:10]}"
        grpc_stored = set(self.stored(self.grpc_topic).values())
        grpc_lost = [body for body in h.grpc_sent.values() if body not in grpc_stored]
        assert grpc_lost == [], f"{len(grpc_lost)} messages acknowledged over gRPC are not stored: {grpc_lost[:10]}"
        moved = [(body, at, where[body]) for body, at in h.acked.items() if where[body] != at]
        assert moved == [], f"stored elsewhere than acknowledged: {moved[:10]}"
        delayed = set(self.stored(self.delay_topic).values())
        assert h.delayed - delayed == set(), f"delay messages acknowledged and never delivered: {h.delayed - delayed}"
        transactions = set(self.stored(self.tx_topic).values())
        assert h.committed - transactions == set(), f"committed and not delivered: {h.committed - transactions}"
        assert h.rolled_back & transactions == set(), f"rolled back and delivered: {h.rolled_back & transactions}"
        kv = KV(client=HttpClient(self.url))
        now = {key: (entry.value.decode(), entry.version) for key, entry in ((k, kv.get(self.topic, k)) for k in h.kv)}
        assert now == h.kv, "a KV key is not as its last answered put left it"

    def stored(self, topic: str | None = None) -> dict[tuple[int, int], str]:
        """Every message of the topic (or `topic`), read from offset 0 of each queue: (queue, offset) -> body."""
        found = {}
        with Consumer(topic or self.topic, client=HttpClient(self.url), stream=False) as consumer:
            while messages := consumer.poll(max_messages=1000):
                found.update(((m.queue, m.queue_offset), m.body.decode()) for m in messages)
        return found

    # ---- the workers -------------------------------------------------------------------------------------------

    def _thread(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _guarded(self, worker: Callable[[], None]) -> Callable[[], None]:
        """The worker, started again after a call it made failed through the SDK's retries (an application's loop)."""

        def run() -> None:
            while not self.stopping.is_set():
                try:
                    worker()
                    return
                except Exception as error:
                    self.histories.note(f"{worker.__name__}: {type(error).__name__}: {error}")
                    time.sleep(0.5)

        return run

    def _producer(self, number: int) -> Callable[[], None]:
        sent = iter(range(10**9))

        def produce() -> None:
            with Producer(self.topic, client=self.client()) as producer:
                while not self.stopping.is_set() and self.producing.is_set():
                    n = next(sent)
                    bodies = [f"p{number}-{n}-{k}" for k in range(PRODUCE_BATCH)]
                    results = producer.send_batch([outgoing(body, queue=n % self.queues) for body in bodies])
                    time.sleep(PRODUCE_PAUSE_S)
                    h = self.histories
                    with h.lock:
                        now = time.monotonic()
                        h.acked_at[int(now - h.started)] += len(bodies)
                        for body, result in zip(bodies, results, strict=True):
                            h.acked[body] = (result.queue, result.offset)
                            h.acked_when[body] = now

        produce.__name__ = f"producer {number}"
        return produce

    def _offset_consumer(self) -> None:
        with Consumer(self.topic, "offsets", client=self.client(), stream=False) as consumer:
            while not self.stopping.is_set():
                before = consumer.positions
                messages = consumer.poll(max_messages=100, wait_ms=500)
                h = self.histories
                with h.lock:
                    if messages and messages[0].queue_offset != before[messages[0].queue]:
                        h.skips.append((messages[0].queue, before[messages[0].queue], messages[0].queue_offset))
                    h.read.update(message.body.decode() for message in messages)
                consumer.commit()

    def _pop_consumer(self) -> None:
        with SimpleConsumer(self.topic, "pops", client=self.client(), invisible_ms=POP_INVISIBLE_MS) as consumer:
            delivered = []
            while not self.stopping.is_set():
                batch = consumer.ack_and_receive(delivered, max_messages=32, wait_ms=500)
                with self.histories.lock:
                    self.histories.popped.update(received.message.body.decode() for received in batch.received)
                delivered = list(batch.received)

    def _delay_producer(self) -> None:
        with Producer(self.delay_topic, client=self.client()) as producer:
            while not self.stopping.is_set() and self.producing.is_set():
                body = f"d-{len(self.histories.delayed)}-{time.monotonic_ns()}"
                producer.send(body, delay=DELAY_MS)
                with self.histories.lock:
                    self.histories.delayed.add(body)
                time.sleep(SIDE_PAUSE_S)

    def _transactions(self) -> None:
        h = self.histories

        def checker(check) -> Resolution:  # an end that was not answered is asked about: answer as it meant
            return Resolution.ROLLBACK if check.message.body.endswith("-rollback") else Resolution.COMMIT

        with TransactionProducer(self.tx_topic, "faults", checker, client=self.client(), check_wait_ms=500) as producer:
            while not self.stopping.is_set() and self.producing.is_set():
                n = time.monotonic_ns()
                body = f"t-{n}-rollback" if n % 5 == 0 else f"t-{n}-commit"
                half = producer.send(body)
                if body.endswith("-rollback"):
                    half.rollback()
                    with h.lock:
                        h.rolled_back.add(body)
                else:
                    half.commit()
                    with h.lock:
                        h.committed.add(body)
                time.sleep(SIDE_PAUSE_S)

    def _kv(self) -> None:
        kv, h = KV(client=self.client()), self.histories
        for n in itertools.count():
            if self.stopping.is_set() or not self.producing.is_set():
                return
            key = f"k{n % KV_KEYS}"
            with h.lock:
                version = h.kv.get(key, (None, None))[1]
            value = f"v{n}"
            try:
                if version is None:
                    written = kv.put(self.topic, key, value, create_only=True)
                else:
                    written = kv.put(self.topic, key, value, if_version=version)
            except Exception as error:  # unanswered, through the SDK's retries: it may have landed; look
                self.histories.note(f"kv put: {type(error).__name__}: {error}")
                entry = kv.get(self.topic, key)
                value, written = entry.value.decode(), entry
            with h.lock:
                h.kv[key] = (value, written.version)
            time.sleep(SIDE_PAUSE_S)

    # ---- gRPC ------------------------------------------------------------------------------------------------

    def _grpc_client(self, spec: dict, on_event: Callable[[dict], None]) -> None:
        endpoint, access_key, secret_key = self.grpc
        home = self.home / f"grpc-{len(self.processes)}"
        home.mkdir(parents=True, exist_ok=True)
        full = {"endpoint": endpoint, "access_key": access_key, "secret_key": secret_key, "topic": self.grpc_topic}
        process = subprocess.Popen(
            [sys.executable, str(CLIENT), json.dumps(full | spec)],
            env={**os.environ, "HOME": str(home)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)

        def read() -> None:
            for line in process.stdout:
                if line.startswith("{"):
                    on_event(json.loads(line))

        self._thread(read)

    def _grpc_sent(self, event: dict) -> None:
        h = self.histories
        with h.lock:
            if "sent" in event:
                body = h.grpc_sent[event["sent"]] = f"g-{len(h.grpc_sent)}"
                h.grpc_when[body] = time.monotonic()
            elif "error" in event:
                h.grpc_errors.append(event)

    def _grpc_consumed(self, event: dict) -> None:
        with self.histories.lock:
            if "received" in event:
                self.histories.grpc_received.add(base64.b64decode(event["received"]["body"]).decode())
            elif "error" in event or "ack_failed" in event:
                self.histories.grpc_errors.append(event)
