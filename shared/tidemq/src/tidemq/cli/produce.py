"""`tidemq produce`: one message per input line, sent in binary batches, with a progress bar."""

from __future__ import annotations

import os
import stat
import time
from typing import BinaryIO

import click
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from ..admin import Admin
from ..client import HttpClient
from ..producer import DEFAULT_BATCH_SIZE, Producer, SendResult
from .options import DURATION, POINT_IN_TIME
from .output import stderr, stdout


def _properties(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", ctx, param)
        pairs[name] = text
    return pairs


def _size(source: BinaryIO) -> int | None:
    """The input's size in bytes if it is a regular file (for the progress bar), else None."""
    try:
        info = os.fstat(source.fileno())
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


@click.command()
@click.argument("topic")
@click.option(
    "--file",
    "-f",
    "source",
    type=click.File("rb"),
    default="-",
    help="Read the messages from this file, one per line [default: stdin].",
)
@click.option("--tag", help="Tag every message (consumers can filter on tags).")
@click.option("--key-prefix", help="Give the message of line n (from 1) the key PREFIXn, for `tidemq message by-key`.")
@click.option(
    "--property",
    "-p",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    callback=_properties,
    help="A user property for every message (repeatable).",
)
@click.option("--sharding-key", help="Send every message to this key's queue, which keeps their order.")
@click.option("--message-group", help="The message group of every message (a FIFO topic's messages each need one).")
@click.option("--queue", type=click.IntRange(min=0), help="Send every message to this queue.")
@click.option(
    "--delay",
    type=DURATION,
    help="A DELAY topic's delay: deliver every message this long after it arrives (10s, 5m, 2h or ms).",
)
@click.option(
    "--deliver-at",
    type=POINT_IN_TIME,
    help="A DELAY topic's delivery time for every message: ms since the epoch, or ISO 8601 (2030-01-31T08:00Z).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 1000),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Messages per request.",
)
@click.option("--quiet", "-q", is_flag=True, help="Show no progress bar and no summary.")
@click.pass_obj
def produce(
    client: HttpClient,
    topic: str,
    source: BinaryIO,
    tag: str | None,
    key_prefix: str | None,
    properties: dict[str, str],
    sharding_key: str | None,
    message_group: str | None,
    queue: int | None,
    delay: int | None,
    deliver_at: int | None,
    batch_size: int,
    quiet: bool,
) -> None:
    """Send each line of the input (without its line break) to TOPIC as one message.

    Without --queue or --sharding-key each batch goes to one queue, taking the queues in turn. With --delay or
    --deliver-at (a DELAY topic), each message sent for later is printed as `msg_id recall_handle`: `tidemq message
    recall TOPIC HANDLE` recalls it before it is due.
    """
    if sum(option is not None for option in (queue, sharding_key, message_group)) > 1:
        raise click.UsageError("give one of --queue, --sharding-key and --message-group")
    if delay is not None and deliver_at is not None:
        raise click.UsageError("give --delay or --deliver-at, not both")
    Admin(client=client).describe_topic(topic)  # an unknown topic fails before any input is read
    producer = Producer(topic, client=client, batch_size=batch_size)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[sent]} msgs"),
        TextColumn("{task.fields[rate]:.0f} msgs/s"),
        TimeElapsedColumn(),
        console=stderr,
        disable=quiet or not stderr.is_terminal,
    )
    task = progress.add_task(f"producing to {topic}", total=_size(source), sent=0, rate=0.0)
    started = time.perf_counter()
    sent, read = 0, 0
    with progress:
        for number, line in enumerate(source, 1):
            read += len(line)
            body = line[:-1] if line.endswith(b"\n") else line
            body = body[:-1] if body.endswith(b"\r") else body
            keys = (f"{key_prefix}{number}",) if key_prefix is not None else ()
            stored = producer.add(
                body,
                keys=keys,
                tag=tag,
                properties=properties,
                queue=queue,
                sharding_key=sharding_key,
                message_group=message_group,
                delivery_time=deliver_at,
                delay=delay,
            )
            if stored:
                sent += len(stored)
                _print_handles(stored)
                progress.update(task, completed=read, sent=sent, rate=sent / (time.perf_counter() - started))
        stored = producer.flush()
        sent += len(stored)
        _print_handles(stored)
        progress.update(task, completed=read, sent=sent, rate=sent / (time.perf_counter() - started))
    elapsed = time.perf_counter() - started
    if not quiet:
        stdout.print(f"produced {sent} messages in {elapsed:.2f} s ({sent / max(elapsed, 1e-9):.0f} msgs/s)")


def _print_handles(results: list[SendResult]) -> None:
    """`msg_id recall_handle` of each delay message sent for later."""
    for result in results:
        if result.recall_handle is not None:
            click.echo(f"{result.msg_id} {result.recall_handle}")
