"""`tidemq group ...`: list consumer groups, create and change them (their retry policy), show their lag, reset their
offsets, push to a target, delete them."""

from __future__ import annotations

import click

from tidemq_protocol.api.groups import GroupChange, GroupView
from tidemq_protocol.api.push import GroupPush
from tidemq_protocol.retry import RetryPolicy

from ..admin import Admin
from ..client import HttpClient
from ..consumer import Start
from .options import START, deleting, retry_options
from .output import stdout, table, timestamp


@click.group()
def group() -> None:
    """Consumer groups: lag, offsets, lifecycle."""


@group.command("list")
@click.pass_obj
def list_(client: HttpClient) -> None:
    """List every consumer group (push groups with their topic and target)."""
    rows = table("group", "created", "fifo", "push")
    for view in Admin(client=client).iter_groups():
        pushed = f"{view.push.topic} -> {view.push.target}" if view.push else ""
        rows.add_row(view.name, timestamp(view.created_at), "fifo" if view.fifo else "", pushed)
    stdout.print(rows)


@group.command("create")
@click.argument("name")
@retry_options
@click.option(
    "--fifo", is_flag=True, help="Consume FIFO topics in order: each message group's messages one batch at a time."
)
@click.pass_obj
def create(client: HttpClient, name: str, max_delivery_attempts: int | None, backoff: object, fifo: bool) -> None:
    """Create consumer group NAME (`tidemq consume --group` creates a missing group itself), with its retry policy:
    how often its messages are delivered (pop or push) before they go to %DLQ%NAME, and the wait between."""
    retry = _retry(max_delivery_attempts, backoff)
    view = Admin(client=client).create_group(name, retry=retry, fifo=fifo)
    stdout.print(f"created {'FIFO ' if fifo else ''}consumer group {name!r}")
    _show_retry(view)


@group.command("update")
@click.argument("name")
@retry_options
@click.option("--default-retry", is_flag=True, help="Drop the group's retry policy: the server's defaults apply.")
@click.pass_obj
def update(
    client: HttpClient, name: str, max_delivery_attempts: int | None, backoff: object, default_retry: bool
) -> None:
    """Change the retry policy of consumer group NAME (the options given; the others stay as they are)."""
    admin = Admin(client=client)
    if default_retry:
        if max_delivery_attempts is not None or backoff is not None:
            raise click.UsageError("--default-retry goes alone, without --max-delivery-attempts or --backoff")
        view = admin.change_group(name, GroupChange(retry=None))
    elif max_delivery_attempts is None and backoff is None:
        raise click.UsageError("give --max-delivery-attempts, --backoff or --default-retry")
    else:
        current = admin.describe_group(name).retry or RetryPolicy()
        changes = {"max_delivery_attempts": max_delivery_attempts, "backoff": backoff}
        retry = current.model_copy(update={field: value for field, value in changes.items() if value is not None})
        view = admin.change_group(name, GroupChange(retry=RetryPolicy.model_validate(retry.model_dump())))
    stdout.print(f"updated consumer group {name!r}")
    _show_retry(view)


def _retry(max_delivery_attempts: int | None, backoff: object) -> RetryPolicy | None:
    if max_delivery_attempts is None and backoff is None:
        return None
    return RetryPolicy(max_delivery_attempts=max_delivery_attempts, backoff=backoff)


def _show_retry(view: GroupView) -> None:
    retry = view.retry or RetryPolicy()
    attempts = retry.max_delivery_attempts or "the server's default"
    backoff = retry.backoff.text() if retry.backoff else "the server's default"
    stdout.print(f"retry: {attempts} delivery attempts, backoff {backoff}", markup=False)


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
@deleting("name", "consumer group", "Delete consumer group {!r} and its committed offsets?")
def delete(client: HttpClient, name: str) -> None:
    """Delete consumer group NAME and its committed offsets."""
    Admin(client=client).delete_group(name)


@group.group("push")
def push() -> None:
    """Push delivery: new messages of a topic go to a target, no consumer polling.

    \b
    Targets:
      lambda:<function name or ARN>   AWS Lambda, invoked synchronously; raising is a failure
      http(s)://host/path             a webhook at a public address (or a host the server allows), POSTed
                                      the messages as signed JSON; 2xx is success, redirects are failures
      python:<module>:<callable>      locally, one the server allows, called in its process; raising fails

    At least once, in order per queue; the group's offset moves only after the target succeeded; a failed
    call is retried after the group's backoff, and after its max delivery attempts the messages go to the topic
    %DLQ%<group> (its retry policy: `tidemq group create|update --max-delivery-attempts --backoff`). A reset
    of the group's offsets while it pushes is respected.
    """


@push.command("set")
@click.argument("name")
@click.option("--topic", required=True, help="The topic whose messages are pushed.")
@click.option("--target", required=True, help="lambda:<function>, http(s)://... or python:<module>:<callable>.")
@click.option("--tag", help="Tag filter: `*` or tags joined by `||` [default: *].")
@click.option("--sql", help="SQL92 filter over message properties, instead of --tag (\"region = 'eu'\").")
@click.option("--batch-size", type=click.IntRange(min=1), help="Most messages in one call [default: 1].")
@click.pass_obj
def push_set(
    client: HttpClient,
    name: str,
    topic: str,
    target: str,
    tag: str | None,
    sql: str | None,
    batch_size: int | None,
) -> None:
    """Push new messages of a topic to a target for consumer group NAME, from its committed offsets (each
    queue's oldest message if it has none); replaces any subscription the group had. For a webhook, prints the
    secret its deliveries are signed with (header X-TideMQ-Signature), shown this once."""
    view = Admin(client=client).set_push(name, topic, target, tag=tag, sql=sql, batch_size=batch_size)
    shown = view.push.target if view.push else target
    stdout.print(f"consumer group {name!r} now pushes from topic {topic!r} to {shown}", markup=False)
    _show(view)
    if view.signing_secret is not None:
        stdout.print(
            f"signing secret (shown only now; receivers verify X-TideMQ-Signature with it): {view.signing_secret}",
            markup=False,
        )


@push.command("show")
@click.argument("name")
@click.pass_obj
def push_show(client: HttpClient, name: str) -> None:
    """Show the push subscription of consumer group NAME."""
    view = Admin(client=client).push(name)
    if view is None:
        stdout.print(f"consumer group {name!r} does not push (pull with `tidemq consume --group`)")
        return
    _show(view)


@push.command("clear")
@click.argument("name")
@click.pass_obj
def push_clear(client: HttpClient, name: str) -> None:
    """Stop pushing to consumer group NAME (its committed offsets stay)."""
    Admin(client=client).clear_push(name)
    stdout.print(f"consumer group {name!r} no longer pushes")


def _show(view: GroupPush) -> None:
    rows = table("setting", "value")
    for setting, value in view.push.model_dump().items():
        rows.add_row(setting, str(value))
    rows.add_row("dead_letter_topic", view.dead_letter_topic)
    stdout.print(rows)
