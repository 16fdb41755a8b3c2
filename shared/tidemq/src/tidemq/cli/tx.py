"""`tidemq tx ...`: transactional messages from the command line (tidemq.transaction_producer): send a half message,
commit or roll it back, take and answer a producer group's check-backs, list a topic's transactions."""

from __future__ import annotations

import click

from tidemq_protocol.api.transactions import TransactionList, TransactionView

from ..api_client import model_of
from ..client import HttpClient, segment
from ..transaction_producer import Resolution, TransactionProducer
from .output import stdout, table, timestamp

STATES = ("prepared", "committed", "rolled_back")


@click.group()
def tx() -> None:
    """Transactional messages: send half messages, commit or roll back, check-backs, outcomes."""


def _producer(client: HttpClient, topic: str, group: str = "") -> TransactionProducer:
    return TransactionProducer(topic, group, client=client)


def _show(view: TransactionView) -> None:
    click.echo(view.model_dump_json())


@tx.command("send")
@click.argument("topic")
@click.argument("body")
@click.option("--group", "-g", required=True, help="The producer group its check-backs go to.")
@click.option("--key", "keys", multiple=True, help="A message key (repeat for more).")
@click.option("--tag", help="The message's tag.")
@click.option("--property", "properties", multiple=True, metavar="NAME=VALUE", help="A user property (repeat).")
@click.option("--queue", type=click.IntRange(min=0), help="The queue [default: the server's choice].")
@click.pass_obj
def send(
    client: HttpClient,
    topic: str,
    body: str,
    group: str,
    keys: tuple[str, ...],
    tag: str | None,
    properties: tuple[str, ...],
    queue: int | None,
) -> None:
    """Send BODY to TOPIC as a half message: invisible until `tidemq tx commit`. Prints its transaction (its
    msg_id is the committed message's id)."""
    named = {}
    for pair in properties:
        name, equals, value = pair.partition("=")
        if not equals:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="'--property'")
        named[name] = value
    half = _producer(client, topic, group).send(body, keys=keys, tag=tag, properties=named, queue=queue)
    _show(half.sent)


def _end(resolution: Resolution, summary: str):
    @click.argument("topic")
    @click.argument("msg_id")
    @click.option("--check", type=click.IntRange(min=1), help="The check-back this answers (from `tidemq tx checks`).")
    @click.pass_obj
    def command(client: HttpClient, topic: str, msg_id: str, check: int | None) -> None:
        _show(_producer(client, topic).end(msg_id, resolution, check))

    command.__doc__ = summary
    return command


tx.command("commit")(
    _end(Resolution.COMMIT, "Commit the half message MSG_ID of TOPIC: it becomes visible, once (again: no change).")
)
tx.command("rollback")(
    _end(Resolution.ROLLBACK, "Roll back the half message MSG_ID of TOPIC: it is never visible (again: no change).")
)
tx.command("unknown")(
    _end(Resolution.UNKNOWN, "Answer a check-back of MSG_ID of TOPIC with unknown: it is asked again later.")
)


@tx.command("checks")
@click.argument("topic")
@click.option("--group", "-g", required=True, help="The producer group whose check-backs to take.")
@click.option("--wait-ms", type=click.IntRange(min=0), default=0, show_default=True, help="Wait this long for one.")
@click.option(
    "--max", "max_checks", type=click.IntRange(1, 32), default=16, show_default=True, help="At most this many."
)
@click.pass_obj
def checks(client: HttpClient, topic: str, group: str, wait_ms: int, max_checks: int) -> None:
    """Take the group's open check-backs of TOPIC, one JSON object per line (check, transaction, message): each is
    now yours to answer with `tidemq tx commit|rollback|unknown TOPIC MSG_ID --check N`."""
    for check in _producer(client, topic, group).take_checks(wait_ms, max_checks):
        click.echo(check.model_dump_json())


@tx.command("list")
@click.argument("topic")
@click.option("--state", type=click.Choice(STATES), help="Only transactions in this state (prepared: pending).")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="Most to show.")
@click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True,
    help="table, or json: one JSON object per transaction, one per line.",
)  # fmt: skip
@click.pass_obj
def list_transactions(client: HttpClient, topic: str, state: str | None, limit: int, output: str) -> None:
    """The transactions of TOPIC, newest first: pending (prepared) ones and how the others ended (kept 72 h)."""
    params = {"limit": limit} | ({"state": state} if state else {})
    page = model_of(TransactionList, client.request("GET", f"/v1/topics/{segment(topic)}/transactions", params=params))
    if output != "table":
        for view in page.transactions:
            _show(view)
        return
    grid = table("msg_id", "state", "group", "queue", "offset", "checks", "prepared", "ended by", numeric=("checks",))
    grid.columns[0].min_width = 24  # an id whole, however narrow the terminal
    for view in page.transactions:
        offset = "" if view.offset is None else str(view.offset)
        grid.add_row(
            view.msg_id, view.state, view.producer_group, str(view.queue), offset, str(view.checks),
            timestamp(view.prepared_ms), view.ended_by or "",
        )  # fmt: skip
    stdout.print(grid)


@tx.command("show")
@click.argument("topic")
@click.argument("msg_id")
@click.pass_obj
def show(client: HttpClient, topic: str, msg_id: str) -> None:
    """Print the transaction of TOPIC whose half message is MSG_ID as JSON."""
    path = f"/v1/topics/{segment(topic)}/transactions/{segment(msg_id)}"
    _show(model_of(TransactionView, client.request("GET", path)))
