"""Producers and consumers of every kind (HTTP: offset, pop and push; gRPC: the RocketMQ 5 client's producer and
simple consumer; tests/fault_load.py) through a gateway while the services under its store misbehave, one fault
after another, each for a while and then gone: DynamoDB throttling and transaction conflicts, S3's SlowDown and
InternalError, connections reset before and after the call was applied, answers cut mid-body, stalls, a slow
network (devtools/aws_faults.py, between the gateway and the moto server), and a full disk (a tmpfs under the
store, filled and emptied: tests/small_disk.py). On both backends, with a cold tier on S3.

From the histories: every acknowledged message stored once where it was acknowledged and delivered to every
consumer, no answer a 5xx but 503 (no gRPC call an internal error), no read that skipped, within RECOVERY_S of each
fault's end the producers back to half their rate before it and every consumer (pop ones included: no
receive left hanging) holding every message acknowledged before that end, and the tier complete afterwards; delay
messages, transactions and KV keys as their last answered calls left them.
`make test` runs a short version (a few seconds of each fault, at high rates); `make test-long` the long one
(a minute of each at 5-20% of calls, stalls of 30 s, one disk-full episode), whose JSON line the issue's note quotes.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.aws_faults import Fault
from servers.process import free_port
from tests.fault_load import POP_INVISIBLE_MS, Load
from tests.gateways import gateway_as_admin
from tests.small_disk import SmallDisk
from tidemq import Admin
from tidemq.credentials import read_profile
from tidemq_store.config import MIB

pytestmark = pytest.mark.local_aws

RECOVERY_S = 60  # a liveness bound: producers back to half their earlier rate within it (a bound, not a speed)
DRAIN_S = 180
QUEUES = 4
RESERVE = 32 * MIB  # the embedded engine's disk reserve here (TIDEMQ_DISK_RESERVE_BYTES)


@dataclass(frozen=True)
class Window:
    """One fault, on for `seconds`: the proxy's `faults`, or (`disk_full`) the store's disk filled."""

    name: str
    faults: tuple[Fault, ...] = ()
    disk_full: bool = False


def windows(backend: str, long: bool) -> list[Window]:
    """The faults a run goes through, in order: at high rates in the short run, at 5-20% of calls in the long one."""
    rate = (lambda short, long_rate: long_rate) if long else (lambda short, long_rate: short)
    stall_s = 30 if long else 6
    network = [
        Window("resets", (Fault("reset_before", rate=rate(0.15, 0.05)), Fault("reset_after", rate=rate(0.15, 0.05)))),
        Window("cut answers", (Fault("cut", rate=rate(0.2, 0.1)),)),
        Window("s3 errors", (Fault("throttle", service="s3", rate=rate(0.4, 0.2)), Fault("error", service="s3"))),
        Window("stalls", (Fault("stall", rate=rate(0.2, 0.05), seconds=stall_s),)),
        Window("slow network", (Fault("delay", seconds=0.05),)),
        Window("disk full", disk_full=True),
    ]
    if backend == "serverless":
        throttled = Fault("throttle", service="dynamodb", rate=rate(0.4, 0.2))
        network.insert(0, Window("dynamodb throttling", (throttled, Fault("conflict", rate=rate(0.2, 0.1)))))
    return network


LONG = [pytest.mark.long, pytest.mark.moto, pytest.mark.timeout(3600)]  # moto: too long to run again on LocalStack


@pytest.mark.parametrize("length", ["short", pytest.param("long", marks=LONG)])
@pytest.mark.parametrize("backend", ["embedded", "serverless"])
def test_every_acknowledged_message_reaches_every_consumer_through_every_fault_and_none_is_answered_a_500(
    backend, length, local_aws, fault_proxy, tmp_path
):
    long = length == "long"
    fault_s, clean_s = (60, 20) if long else (3, 2)
    fault_proxy.reset()
    env = {
        **local_aws.env,
        **fault_proxy.env,  # the gateway's AWS is the moto server through the fault injector
        "TIDEMQ_BACKEND": backend,
        "TIDEMQ_TIER": "s3",
        "TIDEMQ_TIER_BUCKET": f"faults-{uuid.uuid4().hex[:12]}",
        "TIDEMQ_MAINTENANCE_INTERVAL_S": "1",
        "TIDEMQ_EFS_HOT_MS": "600000",  # consumers read the shared directory, not S3 (the moto server is one process)
        "TIDEMQ_GRPC_PORT": str(grpc_port := free_port()),
        "TIDEMQ_GRPC_MIN_LONG_POLLING_MS": "1000",
        "TIDEMQ_POP_MIN_INVISIBLE_MS": str(POP_INVISIBLE_MS),
        "TIDEMQ_PUSH_ALLOWED_HOSTS": "127.0.0.1",
        "TIDEMQ_COMMITLOG_PREALLOCATE_BYTES": "0",  # so that a full disk is met at once, not past 8 MiB of zeros
        "TIDEMQ_DISK_RESERVE_BYTES": str(RESERVE),
    }
    recovered, caught_up, injected = {}, {}, {}
    with (
        SmallDisk(tmp_path / "disk", 256 * MIB) as disk,
        kept_log(disk, tmp_path),
        gateway_as_admin(disk.directory / "data", **env) as url,
    ):
        admin = read_profile(disk.directory / "data" / "credentials")
        Admin(url).create_topic("faults", queues=QUEUES)
        load = Load(url, "faults", QUEUES, tmp_path, (f"127.0.0.1:{grpc_port}", admin.access_key, admin.secret_key))
        load.start()
        try:
            warmed = time.monotonic() + 4
            time.sleep(4)
            baseline = load.rate(warmed - 3, warmed)
            for window in windows(backend, long):
                # What the producers are to come back to: their rate before the first fault in the short run (a
                # minute), the one just before this fault in the long run (ten: a serverless store's moto server
                # slows as its tables grow, its queries and index reads taking time in proportion to them)
                before = load.rate(time.monotonic() - 5, time.monotonic()) if long else baseline
                if window.disk_full:
                    disk.fill(RESERVE // 2 if backend == "embedded" else 0)
                fault_proxy.set(*window.faults)
                time.sleep(fault_s)
                fault_proxy.clear()
                disk.empty()
                cleared_at = time.monotonic()
                recovered[window.name] = round(load.recovered_after(cleared_at, before, RECOVERY_S, window.name), 1)
                caught_up[window.name] = round(load.caught_up(cleared_at, RECOVERY_S, window.name), 1)
                time.sleep(max(0.0, clean_s - (time.monotonic() - cleared_at)))
            injected = fault_proxy.counts()
            load.stop_producing()
            drained_s = load.drained(DRAIN_S)
        finally:
            load.stop()
        load.check()
        tiered_s = wait_tiered(Admin(url), "faults", DRAIN_S)
    summary = load.histories.summary()
    print(
        json.dumps(
            {
                "test": "faults",
                "backend": backend,
                "length": length,
                "baseline_msgs_per_s": round(baseline),
                **summary,
                "faults_injected": injected,
                "lost": 0,
                "recovered_s": recovered,
                "consumers_caught_up_s": caught_up,
                "drained_s": round(drained_s, 1),
                "tier_complete_s": round(tiered_s, 1),
            }
        )
    )


@contextlib.contextmanager
def kept_log(disk: SmallDisk, tmp_path: Path) -> Iterator[None]:
    """The gateway's log, copied out of the small disk before it goes (to read what a failed run did)."""
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            shutil.copy(disk.directory / "data" / "gateway.log", tmp_path / "gateway.log")


def wait_tiered(admin: Admin, topic: str, timeout_s: float) -> float:
    """Wait until the topic's every message is in the cold tier; how long that took."""
    started = time.monotonic()
    while lagging := [queue for queue in admin.tier_status(topic).queues if queue.upload_lag_messages]:
        assert time.monotonic() - started < timeout_s, (
            f"the tier of {topic} is still behind after {timeout_s} s: {lagging}"
        )
        time.sleep(0.5)
    return time.monotonic() - started
