"""`tidemq dlq list|resend`: a consumer group's dead letters (`%DLQ%<group>`), and resending them to the topics they
came from (tidemq.admin: `dead_letters`, `resend_dead_letters`)."""

from __future__ import annotations

import click

from tidemq_protocol.api.dead_letters import ResendResponse

from ..admin import Admin
from ..client import HttpClient
from .output import stderr, stdout, table, timestamp


@click.group()
def dlq() -> None:
    """Dead letters of a consumer group: list them, resend them to their origin topic.

    A message delivered as often as its group's retry policy allows (pop or push) goes to the topic %DLQ%<group>,
    with where it came from in its properties (RETRY_TOPIC, ORIGIN_MESSAGE_ID, RECONSUME_TIME, DLQ_REASON). A
    resend puts it back on that topic as a new message for this group only (received with attempt 1; other groups
    pass over it); each dead letter is resent once: again, it is `already_resent`.
    """


@dlq.command("list")
@click.argument("group")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="First offset to show.")
@click.option("--limit", "-n", type=click.IntRange(1, 1000), default=32, show_default=True, help="At most this many.")
@click.pass_obj
def list_(client: HttpClient, group: str, offset: int, limit: int) -> None:
    """List the dead letters of consumer group GROUP, from --offset."""
    page = Admin(client=client).dead_letters(group, offset=offset, limit=limit)
    rows = table("offset", "msg_id", "origin topic", "attempts", "reason", "resent", numeric=["offset", "attempts"])
    for letter in page.messages:
        properties = letter.properties
        resent = "" if letter.resent_at_ms is None else timestamp(letter.resent_at_ms)
        rows.add_row(
            str(letter.offset),
            letter.msg_id,
            properties.get("RETRY_TOPIC", "-"),
            properties.get("RECONSUME_TIME", "-"),
            properties.get("DLQ_REASON", ""),
            resent,
        )
    stdout.print(rows)
    more = page.next_offset < page.max_offset
    stdout.print(
        f"{page.dead_letter_topic}: offsets {page.min_offset}..{page.max_offset}"
        + (f"; next page: --offset {page.next_offset}" if more else ""),
        markup=False,
    )


@dlq.command("resend")
@click.argument("group")
@click.option("--id", "message_ids", multiple=True, help="A dead letter's msg_id (repeat for more; at most 64).")
@click.option("--from", "from_offset", type=click.IntRange(min=0), help="Resend the range from this offset.")
@click.option(
    "--to", "to_offset", type=click.IntRange(min=0), help="End of the range, not included [default: its end]."
)
@click.pass_obj
def resend(
    client: HttpClient, group: str, message_ids: tuple[str, ...], from_offset: int | None, to_offset: int | None
) -> None:
    """Resend dead letters of consumer group GROUP to the topics they came from: by --id, or the range
    --from/--to (a request of 64 at a time, its progress on stderr). A letter resent before is not sent again."""
    if bool(message_ids) == (from_offset is not None):
        raise click.UsageError("give --id (one or more), or --from (and --to)")
    if message_ids and to_offset is not None:
        raise click.UsageError("--to goes with --from, not --id")
    admin = Admin(client=client)
    if message_ids:
        answers = [admin.resend_dead_letters(group, message_ids=list(message_ids))]
    else:
        answers = admin.resend_dead_letter_range(group, from_offset or 0, to_offset)
    resent = already = 0
    for answer in answers:
        _print(answer)
        resent += sum(r.status == "resent" for r in answer.results)
        already += sum(r.status == "already_resent" for r in answer.results)
        if answer.next_offset is not None:
            stderr.print(f"resent {resent}, {already} already resent; going on from offset {answer.next_offset}")
    stdout.print(f"resent {resent} dead letter(s) of {group!r}; {already} had been resent before", markup=False)


def _print(answer: ResendResponse) -> None:
    for result in answer.results:
        to = f"{result.topic} as {result.resent_msg_id}" if result.resent_msg_id else result.topic
        stdout.print(f"{result.offset} {result.msg_id}: {result.status} ({to})", markup=False)
