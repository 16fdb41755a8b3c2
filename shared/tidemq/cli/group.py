"""`tidemq group ...`: list consumer groups, show their lag, reset their offsets, delete them."""

from __future__ import annotations

import click

from ..admin import Admin
from ..client import HttpClient
from ..consumer import Start
from .options import START, confirm, yes_option
from .output import stdout, table, timestamp


@click.group()
def group() -> None:
    """Consumer groups: lag, offsets, lifecycle."""


@group.command("list")
@click.pass_obj
def list_(client: HttpClient) -> None:
    """List every consumer group."""
    rows = table("group", "created")
    for view in Admin(client=client).iter_groups():
        rows.add_row(view.name, timestamp(view.created_at))
    stdout.print(rows)


@group.command("create")
@click.argument("name")
@click.pass_obj
def create(client: HttpClient, name: str) -> None:
    """Create consumer group NAME (`tidemq consume --group` creates a missing group itself)."""
    Admin(client=client).create_group(name)
    stdout.print(f"created consumer group {name!r}")


@group.command("lag")
@click.argument("name")
@click.option("--topic", help="Only this topic [default: every topic the group has committed offsets on].")
@click.pass_obj
def lag(client: HttpClient, name: str, topic: str | None) -> None:
    """Show how far group NAME is behind, per queue: messages from its committed offset to the queue's end."""
    description = Admin(client=client).describe_group(name, topic)
    if not description.topics:
        stdout.print(f"consumer group {name!r} has committed no offsets yet")
        return
    rows = table(
        "topic",
        "queue",
        "committed",
        "min_offset",
        "max_offset",
        "lag",
        numeric=["queue", "committed", "min_offset", "max_offset", "lag"],
    )
    for topic_lag in description.topics:
        for q in topic_lag.queues:
            committed = "-" if q.committed_offset is None else str(q.committed_offset)
            rows.add_row(topic_lag.topic, str(q.queue), committed, str(q.min_offset), str(q.max_offset), str(q.lag))
    rows.add_section()
    rows.add_row("total", "", "", "", "", str(description.lag))
    stdout.print(rows)


@group.command("reset")
@click.argument("name")
@click.option("--topic", required=True, help="The topic whose offsets to move.")
@click.option(
    "--to",
    "to",
    type=START,
    required=True,
    help="earliest: each queue's oldest message; latest: its end; or the first message at or after a timestamp in ms.",
)
@click.pass_obj
def reset(client: HttpClient, name: str, topic: str, to: Start) -> None:
    """Move the committed offsets of group NAME on every queue of a topic."""
    committed = Admin(client=client).reset_offsets(name, topic, to)
    rows = table("queue", "committed", numeric=["queue", "committed"])
    for queue, offset in sorted(committed.offsets.items()):
        rows.add_row(str(queue), str(offset))
    stdout.print(f"reset consumer group {name!r} on topic {topic!r} to {to}")
    stdout.print(rows)


@group.command("delete")
@click.argument("name")
@yes_option
@click.pass_obj
def delete(client: HttpClient, name: str, yes: bool) -> None:
    """Delete consumer group NAME and its committed offsets."""
    confirm(f"Delete consumer group {name!r} and its committed offsets?", yes)
    Admin(client=client).delete_group(name)
    stdout.print(f"deleted consumer group {name!r}")
