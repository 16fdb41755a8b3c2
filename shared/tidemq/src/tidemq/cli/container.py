"""`tidemq container ...`: run a BrokerContainer (RIP-31), and add, list, reconfigure, promote and remove its brokers.

`tidemq container -c broker-container.conf` runs one in the foreground: the server is `python -m
servers.container`, which this process becomes (the SDK and CLI import no server code). The subcommands talk to a
running container's admin API at `--url` (its `http://<host>:<listenPort>`), as RocketMQ's mqadmin addBroker,
removeBroker, getBrokerConfig and updateBrokerConfig do.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import TextIO

import click
from rich.console import Console

from tidemq_protocol.api.container import BrokerList, BrokerSettings, BrokerView

from ..client import HttpClient
from ..container import MASTER_ROLES, Container
from .output import stdout, table

SERVER_MODULE = "servers.container"
WIDE = 1000


@click.group(invoke_without_command=True)
@click.option(
    "-c",
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Start a container with this broker-container.conf (listenPort, storePathRootDir, brokerConfigPaths), in "
    "the foreground until Ctrl-C or SIGTERM.",
)
@click.pass_context
def container(ctx: click.Context, config: Path | None) -> None:
    """Run a BrokerContainer (RIP-31) and manage its brokers.

    A container serves several brokers in one process, each at <url>/brokers/<brokerName>.

    \b
    Start one:  tidemq container -c broker-container.conf
    Manage it:  tidemq --url http://127.0.0.1:10811 container list   (add, get, config, update, promote, remove)

    The subcommands need an action on Cluster:* (super users have them all): List or Get to look, Create to add,
    Delete to remove, Update to change a config or promote. The container writes its first super user's
    credentials to <storePathRootDir>/credentials.
    """
    if ctx.invoked_subcommand is not None:
        if config is not None:
            raise click.UsageError("-c/--config starts a container: give it alone, without a subcommand")
        return
    if config is None:
        raise click.exceptions.NoArgsIsHelpError(ctx)
    start(config)


def start(config: Path) -> None:
    """Become the container's server process (`python -m servers.container -c CONFIG`)."""
    if importlib.util.find_spec(SERVER_MODULE.partition(".")[0]) is None:
        raise click.ClickException(f"the server code ({SERVER_MODULE}) is not installed beside this tidemq")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", SERVER_MODULE, "-c", str(config)])


# ---- the brokers -------------------------------------------------------------------------------------


@container.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the container's answer as JSON: {brokers: [...]}.")
@click.pass_obj
def list_(client: HttpClient, as_json: bool) -> None:
    """List the brokers: role, disk usage and quota, replication.

    A table of the container's brokers: name, role, identity (cluster_name_id), disk usage against its quota,
    the quota's state (ok, freed, refusing_writes), and a master's slave or a slave's master."""
    brokers = Container(client=client).list_brokers()
    if as_json:
        click.echo(BrokerList(brokers=brokers).model_dump_json())
        return
    rows = table("broker", "role", "identity", "usage/quota", "state", "replication")
    for view in brokers:
        rows.add_row(view.name, view.role, view.identity, usage(view), view.quota.state, replication(view))
    # off a terminal rich assumes 80 columns, and would fold these rows: piped, each broker stays one line
    out = stdout if stdout.is_terminal else Console(highlight=False, soft_wrap=True, width=WIDE)
    out.print(rows)


@container.command("add")
@click.option(
    "-b",
    "--broker-config",
    "source",
    type=click.File("r", encoding="utf-8"),
    required=True,
    help="The broker's config file (brokerName=..., Java properties), read here and sent ('-': stdin).",
)
@click.pass_obj
def add(client: HttpClient, source: TextIO) -> None:
    """Add a broker from its config file (mqadmin addBroker -b).

    The file is read here and its text sent; the broker's store opens (and recovers) before this returns. Its
    storePathRootDir, if given, must be under the container's own directory (the default is
    <storePathRootDir>/brokers/<brokerName> of the container)."""
    admin = Container(client=client)
    view = admin.add_broker(source.read())
    stdout.print(f"added broker {view.name!r}: {summary(view)}")
    stdout.print(f"its URL: {admin.broker_url(view.name)}")


@container.command("get")
@click.argument("name")
@click.pass_obj
def get(client: HttpClient, name: str) -> None:
    """Print broker NAME as JSON.

    Its name, cluster, id, identity, role, store, tier, requests in flight, quota, replication, log isolation."""
    click.echo(Container(client=client).get_broker(name).model_dump_json())


@container.command("config")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the settings as one JSON object.")
@click.pass_obj
def config(client: HttpClient, name: str, as_json: bool) -> None:
    """Show broker NAME's settings, as key=value lines.

    As its config file (and updates since) gave them, secret keys hidden: the lines of a broker .conf file."""
    settings = Container(client=client).broker_config(name)
    if as_json:
        click.echo(BrokerSettings(settings=settings).model_dump_json())
        return
    for key, value in settings.items():
        click.echo(f"{key}={value}")


@container.command("update")
@click.argument("name")
@click.argument("settings", metavar="KEY=VALUE...", nargs=-1, required=True)
@click.pass_obj
def update(client: HttpClient, name: str, settings: tuple[str, ...]) -> None:
    """Set settings of broker NAME (mqadmin updateBrokerConfig).

    Each argument is KEY=VALUE, by the config file's key: e.g. quotaPercentForDiskPartition=0.5.

    The disk quota's settings take effect at once; any other change restarts the broker with its new config
    (it keeps its old one if the new one cannot open)."""
    changes = dict(pair(arg) for arg in settings)
    view = Container(client=client).update_broker_config(name, changes)
    stdout.print(f"updated broker {view.name!r} ({', '.join(changes)}): {summary(view)}")


@container.command("promote")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(MASTER_ROLES),
    default="SYNC_MASTER",
    show_default=True,
    help="The master role it takes.",
)
@click.pass_obj
def promote(client: HttpClient, name: str, role: str) -> None:
    """Make slave broker NAME a master.

    Sets brokerRole=ROLE and brokerId=0: the broker restarts as a master and takes writes."""
    view = Container(client=client).promote(name, role)
    stdout.print(f"promoted broker {view.name!r}: {summary(view)}")


@container.command("remove")
@click.argument("name")
@click.pass_obj
def remove(client: HttpClient, name: str) -> None:
    """Remove broker NAME (mqadmin removeBroker); its files stay.

    It finishes the requests in flight, flushes and closes; adding it again with the same config brings its
    messages back."""
    Container(client=client).remove_broker(name)
    stdout.print(f"removed broker {name!r}")


# ---- how brokers are shown ---------------------------------------------------------------------------


def pair(arg: str) -> tuple[str, str]:
    key, equals, value = arg.partition("=")
    if not equals or not key.strip():
        raise click.BadParameter(f"{arg!r} is not KEY=VALUE", param_hint="'KEY=VALUE...'")
    return key.strip(), value.strip()


def summary(view: BrokerView) -> str:
    return f"{view.role}, {view.identity}, store {view.store}, disk {usage(view)} ({view.quota.state})"


_SIZES = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def size(count: int) -> str:
    """Bytes as people read them: 1536 -> "1.5 KiB"."""
    for unit, scale in _SIZES:
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def usage(view: BrokerView) -> str:
    quota = view.quota
    return f"{size(quota.usage_bytes)} / {'no quota' if quota.quota_bytes is None else size(quota.quota_bytes)}"


def replication(view: BrokerView) -> str:
    """One line of the broker's replication: a master's slave, or a slave's master."""
    state = view.replication
    if not state:
        return "-"
    if view.role == "SLAVE":
        lag = state.get("lag_bytes")
        if state.get("connected"):
            return f"from {state.get('master')}, lag {'?' if lag is None else size(lag)}"
        return f"from {state.get('master')}: not connected ({state.get('error') or 'not yet'})"
    kind = "sync" if state.get("synchronous") else "async"
    if state.get("slave_seen_ms_ago") is None:
        return f"{kind}, no slave yet"
    if not state.get("slave_alive"):
        return f"{kind}, slave gone (last seen {state['slave_seen_ms_ago'] / 1000:.0f}s ago)"
    lag = state.get("slave_lag_bytes")
    return f"{kind}, slave lag {'?' if lag is None else size(lag)}"
