"""The `tidemq` command line: topics, groups, messages, produce and consume, KV namespaces over the HTTP API; a
BrokerContainer and its brokers; the Spark jobs.

Errors end the command with one line on stderr, `tidemq: <what went wrong>`, and exit code 1 (the
API or the connection failed) or 2 (the command line itself is wrong); never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from tidemq_protocol.errors import InvalidArgument, TideMQError

from ..auth import find_credentials
from ..client import DEFAULT_URL, HttpClient
from .lazy_group import LazyGroup, Subcommand

SUBCOMMANDS = {
    "ack": Subcommand("tidemq.cli.pop:ack", "Ack messages received with `tidemq receive`, by receipt handle."),
    "acl": Subcommand("tidemq.cli.access:acl", "Access policies of normal users: grant, revoke, list."),
    "consume": Subcommand("tidemq.cli.consume:consume", "Print the messages of TOPIC, queue by queue in turn."),
    "container": Subcommand("tidemq.cli.container:container", "Run a BrokerContainer (RIP-31) and manage its brokers."),
    "dlq": Subcommand(
        "tidemq.cli.dlq:dlq", "Dead letters of a consumer group: list them, resend them to their origin topic."
    ),
    "group": Subcommand("tidemq.cli.group:group", "Consumer groups: lag, offsets, lifecycle."),
    "grpc": Subcommand("tidemq.cli.grpc_endpoint:grpc", "RocketMQ 5 clients: the gRPC endpoint and a client snippet."),
    "kv": Subcommand(
        "tidemq.cli.kv:kv", "KV namespaces: keys with versioned values, conditional writes, watches and snapshots."
    ),
    "message": Subcommand(
        "tidemq.cli.message:message", "Look messages up by id or key; show a message's trace; recall a delay message."
    ),
    "produce": Subcommand(
        "tidemq.cli.produce:produce",
        "Send each line of the input (without its line break) to TOPIC as one message.",
    ),
    "receive": Subcommand(
        "tidemq.cli.pop:receive", "Receive messages of TOPIC for a pop group, each held for an invisible time."
    ),
    "spark": Subcommand(
        "tidemq.cli.spark:spark",
        "Run the Spark jobs over the cold tier: here (spark-submit on local[2]) or on EMR Serverless.",
    ),
    "topic": Subcommand("tidemq.cli.topic:topic", "Create, list, describe and delete topics."),
    "tx": Subcommand(
        "tidemq.cli.tx:tx", "Transactional messages: send half messages, commit or roll back, check-backs, outcomes."
    ),
    "user": Subcommand("tidemq.cli.access:user", "Users: create, list, rotate a secret, delete."),
}
"""The subcommands, each imported only when it runs (`tidemq --help` shows their summaries)."""


@click.group(
    cls=LazyGroup,
    lazy_subcommands=SUBCOMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--url",
    envvar="TIDEMQ_URL",
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    help="Base URL of the TideMQ HTTP API.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for an answer (long polls wait longer).",
)
@click.option(
    "--retries",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Retries after a connection error or a 5xx, each after a random wait (doubling, up to 5 s) and at least "
    "the server's Retry-After.",
)
@click.option(
    "--profile",
    envvar="TIDEMQ_PROFILE",
    show_envvar=True,
    help="Sign as this profile of the credentials file (~/.tidemq/credentials, or TIDEMQ_CREDENTIALS_FILE) "
    "[default: TIDEMQ_ACCESS_KEY/TIDEMQ_SECRET_KEY, else the default profile, first of <TIDEMQ_HOME>/credentials, "
    "which make run writes].",
)
@click.version_option(package_name="tidemq", prog_name="tidemq")
@click.pass_context
def cli(ctx: click.Context, url: str, timeout: float, retries: int, profile: str | None) -> None:
    """TideMQ from the command line: manage topics, consumer groups and users, produce and consume messages, keep
    keys in KV namespaces."""
    try:
        credentials = find_credentials(profile)
    except (InvalidArgument, ValueError) as error:  # no such profile, or a profile without its keys
        raise click.BadParameter(str(error), ctx, param_hint="'--profile'") from None
    try:
        client = HttpClient(url, timeout_s=timeout, retries=retries, credentials=credentials)
    except InvalidArgument as error:
        raise click.BadParameter(str(error), ctx, param_hint="'--url'") from None
    ctx.obj = ctx.with_resource(client)


def fail(message: str, code: int) -> None:
    click.echo(f"tidemq: {message}", err=True)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI, turning every expected error into one line on stderr and an exit code."""
    try:
        code = cli.main(args=argv, prog_name="tidemq", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:
        error.show()  # `tidemq` or `tidemq topic` alone: the help text
        sys.exit(2)
    except click.UsageError as error:
        hint = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
        fail(f"{error.format_message()}{hint}", 2)
    except click.ClickException as error:
        fail(error.format_message(), error.exit_code)
    except click.Abort as error:
        if isinstance(error.__cause__, KeyboardInterrupt):
            sys.exit(130)
        fail("aborted", 1)
    except TideMQError as error:
        fail(str(error), 1)
    sys.exit(code if isinstance(code, int) else 0)
