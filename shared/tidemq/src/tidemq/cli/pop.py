"""`tidemq receive` and `tidemq ack`: pop consumption from the command line (tidemq.simple_consumer)."""

from __future__ import annotations

import sys

import click

from tidemq_protocol.api.pop import ReceivedMessage
from tidemq_protocol.errors import InvalidReceiptHandle, MessageDeadLettered

from ..client import HttpClient
from ..simple_consumer import SimpleConsumer
from .options import output_option
from .output import stdout


@click.command()
@click.argument("topic")
@click.option("--group", "-g", required=True, help="The pop consumer group (it must exist: tidemq group create).")
@click.option(
    "--max-messages", "-n", type=click.IntRange(min=1), default=32, show_default=True, help="At most this many."
)
@click.option(
    "--invisible-ms",
    type=click.IntRange(min=1),
    help="Hold each message this long before it is delivered again [default: the server's, 30000].",
)
@click.option("--wait-ms", type=click.IntRange(min=0), default=0, show_default=True, help="Wait this long for one.")
@click.option("--tag", help="Tag filter: '*', or tags joined by '||' (\"A || B\").")
@click.option(
    "--sql",
    help="SQL92 filter over message properties, instead of --tag (\"region = 'eu' AND amount > 100\").",
)
@click.option("--ack", "ack_them", is_flag=True, help="Ack each message once it is printed (at least once).")
@output_option("each message with its receipt_handle and attempt, one JSON object per line")
@click.pass_obj
def receive(
    client: HttpClient,
    topic: str,
    group: str,
    max_messages: int,
    invisible_ms: int | None,
    wait_ms: int,
    tag: str | None,
    sql: str | None,
    ack_them: bool,
    output: str,
) -> None:
    """Receive messages of TOPIC for a pop group, each held for an invisible time.

    Up to --max-messages messages from any queue, each held for this consumer for --invisible-ms: ack it (--ack,
    or `tidemq ack` with its receipt_handle) or it is delivered again, its attempt + 1."""
    consumer = SimpleConsumer(topic, group, tag=tag, sql=sql, invisible_ms=invisible_ms, client=client)
    received = consumer.receive(max_messages, wait_ms=wait_ms)
    out = sys.stdout.buffer
    if output == "raw":
        out.write(b"".join(r.message.body + b"\n" for r in received))
    else:
        views = (ReceivedMessage.held(r.message, r.receipt_handle, r.attempt, r.invisible_until_ms) for r in received)
        out.write("".join(view.model_dump_json() + "\n" for view in views).encode())
    out.flush()
    if ack_them and received:
        consumer.ack_all(received)


@click.command()
@click.argument("topic")
@click.argument("receipt_handles", nargs=-1, required=True)
@click.option("--group", "-g", required=True, help="The pop consumer group the messages were received for.")
@click.pass_obj
def ack(client: HttpClient, topic: str, receipt_handles: tuple[str, ...], group: str) -> None:
    """Ack messages received with `tidemq receive`, by receipt handle.

    Each message RECEIPT_HANDLES name is done for the group. Fails if a handle names no current delivery (the
    message was delivered again, or its invisible time changed, since), or a message that went to the group's dead
    letters without an ack (`dead_lettered`)."""
    statuses = SimpleConsumer(topic, group, client=client).ack_all(receipt_handles)
    for handle, status in zip(receipt_handles, statuses, strict=True):
        stdout.print(f"{handle}: {status}")
    lettered = [handle for handle, status in zip(receipt_handles, statuses, strict=True) if status == "dead_lettered"]
    stale = [handle for handle, status in zip(receipt_handles, statuses, strict=True) if status.startswith("invalid")]
    if lettered:
        said = ", ".join(lettered)
        raise MessageDeadLettered(f"{len(lettered)} receipt handle(s) name messages gone to the dead letters: {said}")
    if stale:
        raise InvalidReceiptHandle(f"{len(stale)} receipt handle(s) name no current delivery: {', '.join(stale)}")
