"""The gRPC proxy's parts that need no server: its protobuf modules, its one error mapping, the date window of its
signatures, and the Settings a consumer is answered with."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from devtools import rocketmq_protos
from servers.grpc_proxy import auth, client_settings, status
from servers.grpc_proxy.protocol import definition_pb2 as pb
from servers.grpc_proxy.service import MessagingService
from shared.settings import Settings, get_settings
from tidemq_protocol import errors
from tidemq_protocol.errors import InvalidArgument, Unauthenticated
from tidemq_protocol.retry import ExponentialBackoff, RetryPolicy
from tidemq_store import GroupConfig


def test_the_committed_protobuf_modules_are_what_generation_gives():
    assert rocketmq_protos.differences(rocketmq_protos.ROOT / rocketmq_protos.PROTOCOL) == []


def test_the_proxys_modules_and_the_clients_stubs_load_in_one_process(tmp_path):
    """The trap the issue names: stubs generated for the same proto package clash ("duplicate symbol")."""
    script = (
        "from rocketmq.grpc_protocol import definition_pb2 as theirs\n"
        "from servers.grpc_proxy.protocol import definition_pb2 as ours\n"
        "sent = ours.Message(body=b'x', system_properties=ours.SystemProperties(message_id='m'))\n"
        "print(theirs.Message.FromString(sent.SerializeToString()).system_properties.message_id)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True
    )
    assert (out.returncode, out.stdout.strip()) == (0, "m"), out.stderr


def client_errors() -> list[type[Exception]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.TideMQError) and cls not in (errors.TideMQError, errors.CorruptStore)
    ]


@pytest.mark.parametrize("cls", client_errors(), ids=lambda cls: cls.__name__)
def test_every_error_the_logic_raises_on_purpose_has_a_rocketmq_code(cls):
    error = cls.__new__(cls)
    Exception.__init__(error, "said why")
    answered = status.status_of(error)
    assert answered.code not in (pb.INTERNAL_SERVER_ERROR, pb.CODE_UNSPECIFIED, pb.OK)
    assert answered.message == "said why"


def test_an_invalid_value_is_answered_with_the_code_of_what_it_was_about():
    with pytest.raises(status.Refused) as refused, status.about(pb.ILLEGAL_INVISIBLE_TIME):
        raise InvalidArgument("invisible_ms must be 1000..43200000, got 5")
    assert status.status_of(refused.value).code == pb.ILLEGAL_INVISIBLE_TIME
    assert status.status_of(InvalidArgument("x")).code == pb.BAD_REQUEST


def test_a_bug_is_answered_internal_without_its_details():
    answered = status.status_of(KeyError("secret detail"))
    assert answered.code == pb.INTERNAL_SERVER_ERROR and "secret detail" not in answered.message


def signed_at(moment: datetime) -> int:
    return auth.date_ms(moment.strftime("%Y%m%dT%H%M%SZ"))


@pytest.mark.parametrize("zone_h", [0, 1, 5.5, 5.75, 14, -12, -3.5])
def test_a_date_signed_now_in_any_time_zone_is_accepted(zone_h):
    """The Python client signs its local time labelled Z; Node.js signs UTC."""
    auth.check_date(signed_at(datetime.now(UTC) + timedelta(hours=zone_h)))


@pytest.mark.parametrize(
    "off",
    [timedelta(days=2), timedelta(hours=13), timedelta(hours=-15), timedelta(minutes=7, seconds=30)],
    ids=["two days ago", "west of every zone", "east of every zone", "half a quarter hour off"],
)
def test_a_date_no_clock_could_read_now_is_refused(off):
    with pytest.raises(Unauthenticated, match="no clock's time"):
        auth.check_date(signed_at(datetime.now(UTC) - off))


def test_a_date_that_is_no_date_is_refused():
    with pytest.raises(Unauthenticated, match="yyyyMMddTHHmmssZ"):
        auth.date_ms("2026-11-27 10:00")


def test_a_consumer_backoff_is_the_groups_policy_in_whole_seconds_of_at_least_one():
    backoff = ExponentialBackoff(initial_ms=400, multiplier=3, max_ms=5_000)
    group = GroupConfig(name="g", retry=RetryPolicy(max_delivery_attempts=5, backoff=backoff))
    policy = client_settings.consumer_backoff(group, Settings())
    assert policy.max_attempts == 5
    assert [delay.seconds for delay in policy.customized_backoff.next] == [1, 2, 4, 5, 5]  # 0.4 1.2 3.6 5 5 s


def test_peer_addresses_are_read_from_grpcs_peer_strings():
    assert auth.peer_address("ipv4:127.0.0.1:5000") == "127.0.0.1"
    assert auth.peer_address("ipv6:[::1]:5000") == "::1"
    assert auth.peer_address("unix:/tmp/socket") is None


class Call:
    """What `MessagingService.call` reads of grpc's ServicerContext: the request's headers and peer."""

    def invocation_metadata(self) -> tuple:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"


def thread_name() -> str:
    return threading.current_thread().name


def test_an_idle_proxy_serves_a_call_on_its_loop_and_calls_together_on_its_threads(monkeypatch):
    monkeypatch.setenv("TIDEMQ_AUTH", "off")
    get_settings.cache_clear()
    threads = ThreadPoolExecutor(2, thread_name_prefix="tidemq-grpc")
    service = MessagingService(get_settings(), threads, "tidemq", ("127.0.0.1", 0), inline_when_idle=True)

    async def calls() -> tuple[str, list[str]]:
        alone = await service.call(Call(), thread_name)
        together = await asyncio.gather(service.call(Call(), thread_name), service.call(Call(), thread_name))
        return alone, together

    try:
        alone, together = asyncio.run(calls())
    finally:
        threads.shutdown()
        get_settings.cache_clear()
    assert alone == threading.main_thread().name  # the loop's own thread
    assert all(name.startswith("tidemq-grpc") for name in together)
