"""`tidemq topic ...`: create, list, describe, change retention of and delete topics; their cold tier."""

from __future__ import annotations

import click

from tidemq_protocol.api.topics import TopicView
from tidemq_protocol.limits import HOUR_MS, MAX_QUEUES
from tidemq_protocol.message import MessageType

from ..admin import Admin
from ..client import HttpClient
from .options import RETENTION, deleting
from .output import duration, stdout, table, timestamp


def settings(view: TopicView) -> str:
    return f"{view.queues} queues, retention {duration(view.retention_ms)}, {view.message_type.value}"


@click.group()
def topic() -> None:
    """Create, list, describe and delete topics."""


@topic.command("create")
@click.argument("name")
@click.option(
    "--queues",
    type=click.IntRange(1, MAX_QUEUES),
    default=8,
    show_default=True,
    help="Number of queues: consumers read them in parallel; order is kept within a queue.",
)
@click.option("--retention-ms", type=click.IntRange(min=1000), help="Keep messages this many ms [default: 72 h].")
@click.option(
    "--retention", type=click.Choice(["forever"]), help="'forever': keep messages until the topic is deleted."
)
@click.option(
    "--type",
    "message_type",
    type=click.Choice([t.value for t in MessageType], case_sensitive=False),
    default=MessageType.NORMAL.value,
    show_default=True,
    help="The kind of messages the topic takes.",
)
@click.pass_obj
def create(
    client: HttpClient, name: str, queues: int, retention_ms: int | None, retention: str | None, message_type: str
) -> None:
    """Create topic NAME."""
    if retention_ms is not None and retention is not None:
        raise click.UsageError("give --retention-ms or --retention forever, not both")
    keep = None if retention == "forever" else retention_ms or 72 * HOUR_MS
    created = Admin(client=client).create_topic(
        name, queues=queues, retention_ms=keep, message_type=message_type.upper()
    )
    stdout.print(f"created topic {created.name!r}: {settings(created)}")


@topic.command("list")
@click.pass_obj
def list_(client: HttpClient) -> None:
    """List every topic."""
    rows = table("topic", "queues", "retention", "type", "created", numeric=["queues"])
    for view in Admin(client=client).iter_topics():
        rows.add_row(
            view.name,
            str(view.queues),
            duration(view.retention_ms),
            view.message_type.value,
            timestamp(view.created_at),
        )
    stdout.print(rows)


@topic.command("describe")
@click.argument("name")
@click.pass_obj
def describe(client: HttpClient, name: str) -> None:
    """Show topic NAME: its settings and each queue's offset range [min, max)."""
    view = Admin(client=client).describe_topic(name)
    stdout.print(f"topic {view.name!r}: {settings(view)}, created {timestamp(view.created_at)}")
    for attribute, value in sorted(view.attributes.items()):
        stdout.print(f"  {attribute} = {value}")
    for setting, value in view.type_settings.items():
        stdout.print(f"  {view.message_type} {setting}: {value}")
    rows = table(
        "queue", "min_offset", "max_offset", "messages", numeric=["queue", "min_offset", "max_offset", "messages"]
    )
    for q in view.queue_offsets:
        rows.add_row(str(q.queue), str(q.min_offset), str(q.max_offset), str(q.max_offset - q.min_offset))
    rows.add_section()
    rows.add_row("total", "", "", str(sum(q.max_offset - q.min_offset for q in view.queue_offsets)))
    stdout.print(rows)


@topic.command("retention")
@click.argument("name")
@click.argument("retention", metavar="MS|forever", type=RETENTION)
@click.pass_obj
def retention(client: HttpClient, name: str, retention: int | None) -> None:
    """Keep the messages of topic NAME for MS milliseconds (at least 1000), or forever."""
    view = Admin(client=client).set_retention(name, retention)
    stdout.print(f"topic {view.name!r} now keeps messages {duration(view.retention_ms)}")


@topic.command("delete")
@deleting("name", "topic", "Delete topic {!r} and all its messages?")
def delete(client: HttpClient, name: str) -> None:
    """Delete topic NAME, its messages and every group's offsets on it."""
    Admin(client=client).delete_topic(name)


@topic.command("tier")
@click.argument("name")
@click.pass_obj
def tier(client: HttpClient, name: str) -> None:
    """Show where the messages of topic NAME are: hot from where, cold in which range, upload lag."""
    status = Admin(client=client).tier_status(name)
    stdout.print(f"topic {name!r}: cold tier {status.tier or 'off'}, reads {status.level}")
    columns = ("queue", "hot_min", "cold_min", "cold_max", "max_offset", "upload_lag", "lag_s")
    rows = table(*columns, numeric=columns)
    for q in status.queues:
        cold = ("-", "-") if q.cold_min_offset is None else (str(q.cold_min_offset), str(q.cold_max_offset))
        rows.add_row(
            str(q.queue),
            str(q.hot_min_offset),
            *cold,
            str(q.max_offset),
            str(q.upload_lag_messages),
            f"{q.upload_lag_seconds:.1f}",
        )
    stdout.print(rows)


@topic.command("upload")
@click.argument("name")
@click.pass_obj
def upload(client: HttpClient, name: str) -> None:
    """Upload the waiting messages of topic NAME to the cold tier now (without waiting for their age)."""
    done = Admin(client=client).upload_now(name)
    stdout.print(f"uploaded {done.uploaded} messages of topic {name!r}")
