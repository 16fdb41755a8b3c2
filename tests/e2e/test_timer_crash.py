"""Timer messages through gateway crashes: timers are sent, then the gateway process is killed with SIGKILL again and
again (some kills in its start-up and recovery) and started on the same port and store while they come due, and
some are recalled before each kill; on both backends (serverless: DynamoDB on the session's moto server, which
outlives the gateways, and a maintenance timers job every second).

What is checked once every timer is due and the gateway serves again, from what the queues hold:
- every timer not recalled is delivered, and exactly once (both stores promise exactly once: no duplicates at all),
  under the id its send answered, with its body, and none before its due time (its store timestamp);
- no timer whose recall was answered (recalled, or recalled before) is ever delivered, whatever kill came after;
  a recall cut off by a kill is sent again once the gateway is back, and answered then.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.gateways import RestartedGateway, restarted_gateway
from tidemq import Consumer, Producer
from tidemq.client import HttpClient
from tidemq.errors import ServerUnreachable
from tidemq.producer import outgoing
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import TimerDelivered
from tidemq_protocol.limits import MAX_TIMERS_PER_PUT
from tidemq_protocol.record import TIMER_DELIVER_MS

QUEUES = 4
STARTUP_KILL_EVERY = 4  # every fourth kill lands at any moment of the start-up, recovery included
RECALL_AHEAD_MS = 5_000  # a timer recalled before a kill is due at least this much later


@dataclass
class Sent:
    msg_id: str
    body: bytes
    due_ms: int
    recall_handle: str
    recall: str | None = None  # "recalled" once a recall of it was answered so


@pytest.fixture(
    params=["embedded", pytest.param("serverless", marks=pytest.mark.long)]
)  # serverless (slower on moto): make test-long
def gateway(request, tmp_path) -> Iterator[RestartedGateway]:
    with restarted_gateway(request, tmp_path, request.param, TIDEMQ_TIMER_JOB_INTERVAL_S="1") as gateway:
        yield gateway


@pytest.mark.slow
def test_timers_through_4_gateway_kills_are_each_delivered_once_and_never_when_recalled(gateway):
    small = gateway.env["TIDEMQ_BACKEND"] == "embedded"
    run_through_kills(gateway, timers=2_000 if small else 400, kills=4, window_s=12)


@pytest.mark.long
@pytest.mark.timeout(3600)
def test_20000_timers_through_20_gateway_kills_are_each_delivered_once_and_never_when_recalled(gateway):
    embedded = gateway.env["TIDEMQ_BACKEND"] == "embedded"
    run_through_kills(gateway, timers=20_000 if embedded else 1_000, kills=20, window_s=60)


def run_through_kills(gateway: RestartedGateway, timers: int, kills: int, window_s: float) -> None:
    """Send `timers` due over `window_s` (starting a few seconds from now), kill the gateway `kills` times while they
    come due, then check what the queues hold (see the module docstring)."""
    rng = random.Random(28)
    with HttpClient(gateway.url, timeout_s=120) as setup:
        setup.request("POST", "/v1/topics", json={"name": "timers", "queues": QUEUES, "message_type": "DELAY"})
    sent = send(gateway.url, timers, window_s)
    first_due = min(s.due_ms for s in sent)
    print(f"sent {len(sent)} timers; the first is due in {(first_due - now_ms()) / 1000:.1f} s")
    with HttpClient(gateway.url, timeout_s=30, retries=0) as client:
        producer = Producer("timers", client=client)
        for kill in range(kills):
            in_start_up = kill % STARTUP_KILL_EVERY == STARTUP_KILL_EVERY - 1
            if kill:
                gateway.start(healthy=not in_start_up)
            if not in_start_up:
                recall_some(producer, sent, rng)
            time.sleep(rng.uniform(0.0, 1.5) if in_start_up else rng.uniform(0.2, window_s / kills))
            gateway.kill()
        gateway.start()
    cut_off = [s for s in sent if s.recall == "cut off"]
    with Producer("timers", url=gateway.url) as producer:  # a new connection, and retries (a recall is idempotent)
        for timer in cut_off:  # answered now: recalled, or too late if it came due meanwhile
            try:
                producer.recall(timer.recall_handle)
                timer.recall = "recalled"
            except TimerDelivered:
                timer.recall = None
    last_due = max(s.due_ms for s in sent)
    while now_ms() <= last_due:
        time.sleep(0.2)
    recalled = {s.msg_id for s in sent if s.recall == "recalled"}
    assert recalled, f"no recall was answered ({len(cut_off)} cut off): the timers came due before the kills"
    expected = {s.msg_id: s for s in sent if s.msg_id not in recalled}
    delivered = read_all(gateway.url, len(expected))
    ids = [m.msg_id for m in delivered]
    duplicates = len(ids) - len(set(ids))
    assert duplicates == 0, f"{duplicates} timers delivered twice"
    assert not recalled & set(ids), f"{len(recalled & set(ids))} recalled timers delivered"
    assert set(ids) == set(expected), (
        f"{len(set(expected) - set(ids))} timers lost, {len(set(ids) - set(expected))} foreign"
    )
    early = [m for m in delivered if m.store_timestamp < expected[m.msg_id].due_ms]
    assert early == [], f"{len(early)} timers delivered early"
    for message in delivered:
        assert message.body == expected[message.msg_id].body
        assert message.properties[TIMER_DELIVER_MS] == str(expected[message.msg_id].due_ms)
    print(
        f"{kills} kills over {(last_due - first_due) / 1000:.0f} s of due times: {len(sent)} timers sent,"
        f" {len(recalled)} recalled ({len(cut_off)} recalls cut off by a kill), {len(delivered)} delivered once each"
    )


def send(url: str, count: int, window_s: float) -> list[Sent]:
    """`count` timers due at a steady rate over `window_s`, sent MAX_TIMERS_PER_PUT to a put; the first is due a few
    seconds after they are all sent (three times what a full put took, times the puts), so that they come due during
    the kills."""
    with Producer("timers", url=url) as producer:
        began = time.monotonic()
        producer.send_batch([outgoing(b"warm-up", delay=3_600_000) for _ in range(MAX_TIMERS_PER_PUT)])
        sending_s = (time.monotonic() - began) * count / MAX_TIMERS_PER_PUT
    start, step = now_ms() + int(sending_s * 3000) + 3_000, window_s * 1000 / count
    sent: list[Sent] = []
    with Producer("timers", url=url) as producer:
        for first in range(0, count, MAX_TIMERS_PER_PUT):
            batch = []
            for n in range(first, min(first + MAX_TIMERS_PER_PUT, count)):
                due = start + int(n * step)
                batch.append((f"timer {n}".encode(), due))
            results = producer.send_batch([outgoing(body, delivery_time=due) for body, due in batch])
            sent += [Sent(r.msg_id, body, due, r.recall_handle) for r, (body, due) in zip(results, batch, strict=True)]
    return sent


def recall_some(producer: Producer, sent: list[Sent], rng: random.Random) -> None:
    """Recall a few timers due well after now; a recall the kill cuts off is sent again after the restart."""
    ahead = [s for s in sent if s.due_ms > now_ms() + RECALL_AHEAD_MS and s.recall is None]
    for timer in rng.sample(ahead, min(len(ahead), 10)):
        try:
            producer.recall(timer.recall_handle)
            timer.recall = "recalled"
        except ServerUnreachable:  # the gateway is starting: the recall's fate is told after the next start
            timer.recall = "cut off"


def read_all(url: str, want: int) -> list:
    """Every message of the topic, reading its queues from the start until `want` are there (or a minute passed:
    then what is there, for the checks to say what is missing)."""
    messages, deadline = [], time.monotonic() + 60
    with Consumer("timers", url=url) as consumer:
        while time.monotonic() < deadline:
            batch = consumer.poll(wait_ms=500)
            messages += batch
            if len(messages) >= want and not batch:
                break
    return messages
