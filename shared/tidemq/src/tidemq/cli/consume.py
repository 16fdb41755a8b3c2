"""`tidemq consume`: print a topic's messages as JSON lines or raw bodies, optionally as a consumer group."""

from __future__ import annotations

import sys

import click

from ..client import HttpClient
from ..consumer import Consumer, Start
from .options import START, output_option
from .output import message_json

FOLLOW_WAIT_MS = 1000
"""How long one poll waits for new messages with --follow."""
MAX_POLL_MESSAGES = 1000


@click.command()
@click.argument("topic")
@click.option(
    "--group",
    "-g",
    help="Consume as this consumer group (created if missing): start from its committed "
    "offsets and commit as messages are printed.",
)
@click.option(
    "--from",
    "start",
    type=START,
    default="earliest",
    show_default=True,
    help="Where queues without a committed offset start: earliest, latest, or the first message at or "
    "after a timestamp in ms.",
)
@click.option(
    "--queue",
    "queues",
    type=click.IntRange(min=0),
    multiple=True,
    help="Read only this queue (repeatable) [default: every queue].",
)
@click.option("--offset", type=click.IntRange(min=0), help="Start the --queue queues at this offset.")
@click.option("--tag", default="*", show_default=True, help="Tag filter: '*', or tags joined by '||' (\"A || B\").")
@click.option(
    "--sql",
    help="SQL92 filter over message properties, instead of --tag (\"region = 'eu' AND amount > 100\").",
)
@click.option("--count", "-n", type=click.IntRange(min=1), help="Stop after this many messages.")
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new messages instead of stopping at the end.")
@output_option("one JSON object per message and line")
@click.pass_obj
def consume(
    client: HttpClient,
    topic: str,
    group: str | None,
    start: Start,
    queues: tuple[int, ...],
    offset: int | None,
    tag: str,
    sql: str | None,
    count: int | None,
    follow: bool,
    output: str,
) -> None:
    """Print the messages of TOPIC, queue by queue in turn.

    Stops once every queue is read to its end (or after --count messages); with --follow it waits
    for more until interrupted. With --group the offsets are committed after each batch is printed.
    """
    if offset is not None and not queues:
        raise click.UsageError("--offset needs --queue: it is an offset within a queue")
    consumer = Consumer(topic, group, start=start, tag=tag, sql=sql, queues=queues or None, client=client)
    if offset is not None:
        for queue in queues:
            consumer.seek(queue, offset)
    out = sys.stdout.buffer
    printed = 0
    while count is None or printed < count:
        wanted = MAX_POLL_MESSAGES if count is None else min(MAX_POLL_MESSAGES, count - printed)
        messages = consumer.poll(max_messages=wanted, wait_ms=FOLLOW_WAIT_MS if follow else 0)
        if not messages and not follow:
            break  # every queue is at its end
        if output == "raw":
            out.write(b"".join(m.body + b"\n" for m in messages))
        else:
            out.write("".join(message_json(m) + "\n" for m in messages).encode())
        out.flush()
        printed += len(messages)
        if group is not None:
            consumer.commit()  # only what is printed: at least once
    if group is not None:
        consumer.commit()  # the positions past messages the filter skipped at the end
