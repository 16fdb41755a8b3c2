"""`tidemq.Container` and `tidemq container ...` against a real BrokerContainer process (`python -m
servers.container`), the CLI run as the installed console script; and `tidemq container -c` starting one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.containers import RunningContainer, conf_directory, container_running
from tests.gateways import signing_with
from tidemq import Admin, Consumer, Container, HttpClient, Producer
from tidemq.cli import cli
from tidemq.credentials import Credentials
from tidemq_protocol.acl import AclEntry
from tidemq_protocol.errors import AccessDenied, BrokerNotFound, BrokerReadOnly, InvalidArgument, TopicNotFound

TIDEMQ = Path(sys.executable).parent / "tidemq"


@pytest.fixture(scope="module")
def container(tmp_path_factory) -> Iterator[RunningContainer]:
    """One container, broker `a` from its config file; this process (and the CLI it runs) signs as its super user."""
    root = tmp_path_factory.mktemp("container") / "root"
    with container_running(root, {"broker-0.conf": "brokerName=a\n"}) as running, signing_with(root / "credentials"):
        yield running


@pytest.fixture(scope="module")
def sdk(container) -> Iterator[Container]:
    with Container(container.url) as client:
        yield client


def environment(**extra: str) -> dict[str, str]:
    return {**{name: value for name, value in os.environ.items() if name != "TIDEMQ_URL"}, **extra}


@pytest.fixture(scope="module")
def tidemq(container):
    """Run `tidemq --url <container> ARGS...` to completion (`env`: more environment variables)."""

    def run(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
        command = [str(TIDEMQ), "--url", container.url, *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment(**env))

    return run


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The error a failed command printed: one line, `tidemq: ...`, nothing on stdout, exit `code`."""
    assert (result.returncode, result.stdout) == (code, ""), (result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith("tidemq: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def rows(table: str) -> dict[str, list[str]]:
    """A table's rows by their first cell (the header's included)."""
    return {line.split()[0]: line.split() for line in table.splitlines() if line.strip()}


def test_list_shows_the_broker_of_the_config_file(tidemq, sdk):
    table = rows(ok(tidemq("container", "list")))
    assert table["broker"] == ["broker", "role", "identity", "usage/quota", "state", "replication"]
    assert table["a"][:3] == ["a", "ASYNC_MASTER", "DefaultCluster_a_0"]
    assert "no quota" in " ".join(table["a"]) and "no slave yet" in " ".join(table["a"])

    listed = json.loads(ok(tidemq("container", "list", "--json")))
    assert [broker["name"] for broker in listed["brokers"]] == ["a"]
    [a] = sdk.list_brokers()
    assert (a.name, a.role, a.id, a.identity, a.replication["synchronous"]) == (
        "a",
        "ASYNC_MASTER",
        0,
        "DefaultCluster_a_0",
        False,
    )
    assert sdk.broker_config("a") == {"brokerName": "a"}
    assert sdk.broker_url("a") == f"{sdk.url}/brokers/a"


def test_a_broker_added_from_a_file_serves_its_own_topics_takes_a_config_change_and_is_removed(
    tidemq, sdk, container, tmp_path
):
    (tmp_path / "broker-b.conf").write_text("# broker b\nbrokerName=b\nflushDiskType=ASYNC\n")
    added = ok(tidemq("container", "add", "-b", tmp_path / "broker-b.conf"))
    assert added.startswith("added broker 'b': ASYNC_MASTER, DefaultCluster_b_0, store ")
    assert f"its URL: {container.url}/brokers/b" in added
    assert [view.name for view in sdk.list_brokers()] == ["a", "b"]
    assert str(container.root / "brokers" / "b") == sdk.get_broker("b").store

    # b is a broker of its own: its topics are not a's
    with Admin(sdk.broker_url("b")) as admin:
        admin.create_topic("orders", queues=2)
        with Producer("orders", sdk.broker_url("b")) as producer:
            sent = producer.send(b"order 1", keys=["order-1"])
        assert [message.body for message in admin.messages_by_key("orders", "order-1")] == ["order 1"]
    with Admin(sdk.broker_url("a")) as other, pytest.raises(TopicNotFound):
        other.describe_topic("orders")

    ok(tidemq("container", "update", "b", "quotaPercentForDiskPartition=0.5"))
    assert "quotaPercentForDiskPartition=0.5" in ok(tidemq("container", "config", "b")).splitlines()
    assert json.loads(ok(tidemq("container", "config", "b", "--json")))["settings"] == {
        "brokerName": "b",
        "flushDiskType": "ASYNC",
        "quotaPercentForDiskPartition": "0.5",
    }
    assert json.loads(ok(tidemq("container", "get", "b")))["name"] == "b"
    refused = one_line_error(tidemq("container", "update", "b", "quotaPercentForDiskPartition"), 2)
    assert "'quotaPercentForDiskPartition' is not KEY=VALUE" in refused
    unknown = one_line_error(tidemq("container", "update", "b", "fooBar=1"), 1)
    assert "unknown setting 'fooBar'" in unknown
    assert sdk.broker_config("b")["quotaPercentForDiskPartition"] == "0.5"  # the refused changes left it as it was

    assert ok(tidemq("container", "remove", "b")) == "removed broker 'b'\n"
    assert "b" not in rows(ok(tidemq("container", "list")))
    assert "holds no broker 'b'" in one_line_error(tidemq("container", "get", "b"), 1)

    # its files stayed: added again, it has its messages
    sdk.add_broker({"brokerName": "b"})
    with Consumer("orders", group="check", url=sdk.broker_url("b")) as consumer:
        assert [(message.queue, message.queue_offset, message.body) for message in consumer.poll()] == [
            (sent.queue, sent.offset, b"order 1")
        ]
    sdk.remove_broker("b")
    assert [view.name for view in sdk.list_brokers()] == ["a"]


def test_an_unknown_broker_is_a_one_line_error(tidemq, sdk):
    for args in (
        ["get", "nope"],
        ["config", "nope"],
        ["remove", "nope"],
        ["update", "nope", "a=1"],
        ["promote", "nope"],
    ):
        assert one_line_error(tidemq("container", *args), 1) == "tidemq: this container holds no broker 'nope'\n"
    with pytest.raises(BrokerNotFound):
        sdk.get_broker("nope")


def test_what_the_command_line_and_the_sdk_refuse_before_sending(tidemq, sdk, tmp_path):
    missing = one_line_error(tidemq("container", "add", "-b", tmp_path / "missing.conf"), 2)
    assert "missing.conf" in missing
    assert "is not KEY=VALUE" in one_line_error(tidemq("container", "update", "a", "=1"), 2)
    refused = one_line_error(tidemq("container", "promote", "a", "--role", "SLAVE"), 2)
    assert "'SLAVE' is not one of 'SYNC_MASTER', 'ASYNC_MASTER'" in refused
    with pytest.raises(InvalidArgument, match="line break"):
        sdk.add_broker({"brokerName": "c\nbrokerRole=SLAVE"})
    with pytest.raises(InvalidArgument, match="SYNC_MASTER or ASYNC_MASTER"):
        sdk.promote("a", "SLAVE")
    # a store outside the container's directory, refused by the server
    with pytest.raises(InvalidArgument, match="outside the container's directory"):
        sdk.add_broker(f"brokerName=c\nstorePathRootDir={tmp_path / 'elsewhere'}\n")
    assert [view.name for view in sdk.list_brokers()] == ["a"]


def test_a_normal_user_needs_cluster_permissions(tidemq, sdk, container):
    with Admin(container.url) as users:  # the container's users, at its root URL
        made = users.create_user("operator")
        key = Credentials(made.name, made.secret_key)
        with Container(client=HttpClient(container.url, credentials=key)) as operator:
            with pytest.raises(AccessDenied, match="may not List or Get on Cluster"):
                operator.list_brokers()
            as_operator = {"TIDEMQ_ACCESS_KEY": made.name, "TIDEMQ_SECRET_KEY": made.secret_key}
            refused = one_line_error(tidemq("container", "remove", "a", **as_operator), 1)
            assert refused == "tidemq: user 'operator' may not Delete on Cluster:*\n"

            users.grant("operator", AclEntry(resource="Cluster:*", actions=["List"]))
            assert [view.name for view in operator.list_brokers()] == ["a"]
            with pytest.raises(AccessDenied, match="may not Update on Cluster"):
                operator.update_broker_config("a", {"quotaPercentForDiskPartition": "0.5"})
    assert sdk.broker_config("a") == {"brokerName": "a"}


def test_tidemq_container_c_starts_a_container_whose_slave_is_promoted_here(tidemq, sdk, container, tmp_path):
    """A second container, started as `tidemq container -c`, holds master `r`; this module's container gets r's
    slave, which copies what r stores, refuses writes, and is promoted (`tidemq container promote`) once r's
    container stops, keeping r's messages and taking new ones."""
    root = tmp_path / "second"
    started = [str(TIDEMQ), "container", "-c", str(conf_directory(root) / "broker-container.conf")]  # python <script>
    with container_running(root, {"r.conf": "brokerName=r\nbrokerRole=SYNC_MASTER\n"}, started) as second:
        master_key = second.credentials
        with Container(client=HttpClient(second.url, credentials=master_key)) as other:
            assert [(view.name, view.role) for view in other.list_brokers()] == [("r", "SYNC_MASTER")]
            master = HttpClient(other.broker_url("r"), credentials=master_key)
        slave = {
            "brokerName": "r",
            "brokerRole": "SLAVE",
            "brokerId": "1",
            "haMasterAddress": second.url,
            "haMasterAccessKey": master_key.access_key,
            "haMasterSecretKey": master_key.secret_key,
        }
        assert sdk.add_broker(slave).identity == "DefaultCluster_r_1"
        assert sdk.broker_config("r")["haMasterSecretKey"] == "********"
        Admin(client=master).create_topic("replicated", queues=1)
        Producer("replicated", client=master).send(b"before the failover")
        master.close()
        with Admin(sdk.broker_url("r")) as reader:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if reader.describe_topic("replicated").queue_offsets[0].max_offset == 1:
                        break
                except TopicNotFound:
                    pass
                assert time.monotonic() < deadline, sdk.get_broker("r").replication
                time.sleep(0.1)
        row = rows(ok(tidemq("container", "list")))["r"]
        assert row[:3] == ["r", "SLAVE", "DefaultCluster_r_1"] and f"from {second.url}, lag" in " ".join(row)
        with Producer("replicated", sdk.broker_url("r")) as producer, pytest.raises(BrokerReadOnly):
            producer.send(b"to a slave")

    promoted = ok(tidemq("container", "promote", "r", "--role", "ASYNC_MASTER"))
    assert promoted.startswith("promoted broker 'r': ASYNC_MASTER, DefaultCluster_r_0")
    assert {"brokerRole": "ASYNC_MASTER", "brokerId": "0"}.items() <= sdk.broker_config("r").items()
    with Producer("replicated", sdk.broker_url("r")) as producer:
        producer.send(b"after the failover")
    with Consumer("replicated", group="failover", url=sdk.broker_url("r")) as consumer:
        assert [message.body for message in consumer.poll()] == [b"before the failover", b"after the failover"]
    sdk.remove_broker("r")


def test_tidemq_container_without_a_config_or_with_a_missing_one(tmp_path):
    alone = subprocess.run([str(TIDEMQ), "container"], capture_output=True, text=True, timeout=60, env=environment())
    assert (alone.returncode, alone.stdout) == (2, "")
    assert (
        alone.stderr.startswith("Usage: tidemq container [OPTIONS] [COMMAND] [ARGS]...") and "promote" in alone.stderr
    )
    missing = subprocess.run(
        [str(TIDEMQ), "container", "-c", tmp_path / "nowhere.conf"],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment(),
    )
    assert one_line_error(missing, 2).startswith("tidemq: Invalid value for '-c' / '--config': File ")


def test_every_container_command_and_option_has_help():
    group = cli.commands["container"]
    assert isinstance(group, click.Group) and group.help
    assert set(group.commands) == {"list", "add", "get", "config", "update", "promote", "remove"}
    for command in (group, *group.commands.values()):
        assert command.help, command.name
        assert all(option.help for option in command.params if isinstance(option, click.Option)), command.name
