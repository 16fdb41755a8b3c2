"""`tidemq message ...`: look messages up by id or by key, each printed as one JSON line; recall a delay message."""

from __future__ import annotations

import click

from tidemq_protocol.errors import MessageNotFound

from ..admin import Admin
from ..client import HttpClient
from .output import message_json


@click.group()
def message() -> None:
    """Look messages up by id or key; recall a delay message."""


@message.command("get")
@click.argument("msg_id")
@click.pass_obj
def get(client: HttpClient, msg_id: str) -> None:
    """Print the message with id MSG_ID as JSON."""
    click.echo(message_json(Admin(client=client).message(msg_id)))


@message.command("by-key")
@click.argument("topic")
@click.argument("key")
@click.option("--limit", type=click.IntRange(1, 1000), default=32, show_default=True, help="Most messages to show.")
@click.pass_obj
def by_key(client: HttpClient, topic: str, key: str, limit: int) -> None:
    """Print the most recent messages of TOPIC carrying KEY, oldest first, one JSON object per line."""
    found = Admin(client=client).messages_by_key(topic, key, limit=limit)
    if not found:  # like `message get` with an unknown id
        raise MessageNotFound(f"in topic {topic!r} with key {key!r}")
    for view in found:
        click.echo(message_json(view))


@message.command("recall")
@click.argument("topic")
@click.argument("recall_handle")
@click.pass_obj
def recall(client: HttpClient, topic: str, recall_handle: str) -> None:
    """Recall the delay message of TOPIC that RECALL_HANDLE names (printed by `tidemq produce --delay`) before it is
    due: it is then never delivered."""
    from ..producer import Producer

    recalled = Producer(topic, client=client).recall(recall_handle)
    click.echo(f"recalled {recalled.msg_id}" + (" (recalled before)" if recalled.again else ""))
