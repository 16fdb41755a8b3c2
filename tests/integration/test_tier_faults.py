"""S3 misbehaving: a quarter of the calls fail (500, 503 SlowDown), some are slow. Nothing is lost, produce goes on."""

from __future__ import annotations

import random
import threading
import time

import pytest
from botocore.awsrequest import AWSResponse

from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

from ..tier_reads import read_all, wait_uploaded
from .test_tier import tier_options

ERRORS = [
    (503, b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"),
    (500, b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"),
]


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


class FlakyS3:
    """A botocore `before-send` hook: fails `failure_rate` of the calls with a 5xx, delays `slow_rate` of them."""

    def __init__(self, failure_rate: float, slow_rate: float, slow_s: float) -> None:
        self.failure_rate, self.slow_rate, self.slow_s = failure_rate, slow_rate, slow_s
        self.rng = random.Random(7)
        self.calls = self.failed = self.slowed = 0
        self.on = True
        self._lock = threading.Lock()

    def __call__(self, request, **_) -> AWSResponse | None:
        with self._lock:
            if not self.on:
                return None
            self.calls += 1
            roll = self.rng.random()
            if roll < self.failure_rate:
                self.failed += 1
                status, body = ERRORS[self.failed % len(ERRORS)]
                return AWSResponse(request.url, status, {"Content-Type": "application/xml"}, _Body(body))
            slow = roll < self.failure_rate + self.slow_rate
            self.slowed += slow
        if slow:
            time.sleep(self.slow_s)
        return None


@pytest.mark.long  # the fault tests (tests/e2e/test_faults.py) run S3's faults through a gateway in make test
def test_a_flaky_s3_loses_nothing_and_never_stops_produce(aws_env, open_test_store):
    store = open_test_store(**tier_options(tier_upload_age_ms=50, tier_upload_messages=200))
    store.create_topic(TopicConfig(name="t", queues=4))
    flaky = FlakyS3(failure_rate=0.25, slow_rate=0.1, slow_s=0.3)
    store.driver.client.meta.events.register("before-send.s3", flaky)

    produced, errors = [], []

    def producer() -> None:
        deadline = time.monotonic() + 4
        batch = 0
        while time.monotonic() < deadline:
            try:
                results = store.put("t", [Message(f"{batch}-{i}".encode() * 20, queue=batch % 4) for i in range(20)])
                produced.extend(results)
            except Exception as error:
                errors.append(error)
            batch += 1
            time.sleep(0.002)

    thread = threading.Thread(target=producer)
    thread.start()
    thread.join()
    assert errors == [] and len(produced) > 1000  # produce never noticed S3's trouble

    expected = {q: read_all(store.hot, "t", q) for q in range(4)}  # hot reads work meanwhile too
    wait_uploaded(store, "t", timeout_s=120)  # through the failures: the uploader retries until done
    assert flaky.calls >= 50 and flaky.failed >= 0.2 * flaky.calls, (flaky.calls, flaky.failed)
    assert flaky.slowed > 0

    flaky.on = False  # reading back is checked with a healthy S3
    store.clean_expired()
    assert all(s.hot_min_offset > 0 for s in store.tier_status("t"))
    for queue in range(4):
        assert read_all(store, "t", queue) == expected[queue]
    tiers = [store.dispatcher.tiered_queue("t", q) for q in range(4)]
    assert sum(t.max_offset for t in tiers) == len(produced)  # every message once
