"""`tidemq message ...`: look messages up by id or by key, each printed as one JSON line; show a message's trace;
recall a delay message."""

from __future__ import annotations

import datetime as dt

import click

from tidemq_protocol.errors import MessageNotFound

from ..admin import Admin
from ..client import HttpClient
from .output import message_json, stderr


@click.group()
def message() -> None:
    """Look messages up by id or key; show a message's trace; recall a delay message."""


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


TRACE_DETAILS = (
    "messaging.message.id",
    "enduser.id",
    "client.address",
    "tidemq.delivery.method",
    "tidemq.dead_letter.message.id",
    "tidemq.resent.message.id",
    "tidemq.tier.medium",
    "tidemq.trace.derived",
)
"""Attributes of an event its line shows besides its time, kind, queue:offset, group and attempt."""


@message.command("trace")
@click.argument("msg_id")
@click.option("--json", "as_json", is_flag=True, help="Print the trace as one JSON object instead of a table.")
@click.pass_obj
def trace(client: HttpClient, msg_id: str, as_json: bool) -> None:
    """Print what the broker recorded of message MSG_ID, oldest event first: stored, delivered and retried per
    group, acked, nacked, dead-lettered, resent; then what the store shows of it now (tiered, expired, compacted).
    Why a trace is empty or short is said below it."""
    found = Admin(client=client).message_trace(msg_id)
    if as_json:
        click.echo(found.model_dump_json())
        return
    click.echo(f"message {found.msg_id} of topic {found.topic}")
    for event in found.events:  # one plain line per event (no table: a narrow terminal must not cut its words)
        attributes = event.attributes
        when = dt.datetime.fromtimestamp(event.time_unix_nano / 1e9).astimezone().isoformat(timespec="milliseconds")
        position = f"{attributes.get('messaging.destination.partition.id')}:{attributes.get('tidemq.queue.offset')}"
        group, attempt = attributes.get("messaging.consumer.group.name"), attributes.get("tidemq.delivery.attempt")
        words = [when, event.event, position]
        words += [] if group is None else [f"group={group}"]
        words += [] if attempt is None else [f"attempt={attempt}"]
        words += [f"{name}={attributes[name]}" for name in TRACE_DETAILS if name in attributes]
        click.echo("  ".join(words))
    if found.note:
        stderr.print(found.note)


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
