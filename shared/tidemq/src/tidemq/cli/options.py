"""What several commands take: start positions, retentions, and --yes before deleting something."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from .output import stdout

if TYPE_CHECKING:  # the commands that take a start position import the consumer; the others need not
    from ..client import HttpClient
    from ..consumer import Start


class StartPosition(click.ParamType):
    """`earliest`, `latest`, or a timestamp in ms since the epoch."""

    name = "earliest|latest|TIMESTAMP_MS"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> Start:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text in ("earliest", "latest"):
            return text  # type: ignore[return-value]
        if text.isdigit():
            return int(text)
        self.fail(f"{value!r} is not 'earliest', 'latest' or a timestamp in ms since the epoch", param, ctx)


class Retention(click.ParamType):
    """How long a topic keeps messages: milliseconds (at least 1000), or `forever`."""

    name = "MS|forever"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int | None:
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "forever":
            return None
        if text.isdigit() and int(text) >= 1000:
            return int(text)
        self.fail(f"{value!r} is not a number of milliseconds (at least 1000) or 'forever'", param, ctx)


class BackoffText(click.ParamType):
    """A backoff as tidemq_protocol.retry writes it: `exponential:1s,2,5m` or `customized:1s,5s,1m`."""

    name = "BACKOFF"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        from tidemq_protocol.errors import InvalidArgument
        from tidemq_protocol.retry import CustomizedBackoff, ExponentialBackoff, parse_backoff

        if isinstance(value, ExponentialBackoff | CustomizedBackoff):
            return value
        try:
            return parse_backoff(str(value))
        except InvalidArgument as error:
            self.fail(str(error), param, ctx)


class Duration(click.ParamType):
    """A duration in ms: `1500`, `1500ms`, `10s`, `5m` or `2h`."""

    name = "DURATION"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from tidemq_protocol.errors import InvalidArgument
        from tidemq_protocol.retry import duration_ms

        if isinstance(value, int):
            return value
        try:
            return duration_ms(str(value))
        except InvalidArgument as error:
            self.fail(str(error), param, ctx)


class PointInTime(click.ParamType):
    """A time: ms since the epoch, or an ISO 8601 date and time (without a zone: the local one)."""

    name = "TIME"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from datetime import datetime

        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text.isdigit():
            return int(text)
        try:
            return round(datetime.fromisoformat(text).timestamp() * 1000)
        except ValueError:
            self.fail(f"{value!r} is neither ms since the epoch nor an ISO 8601 time (2030-01-31T08:00Z)", param, ctx)


START = StartPosition()
RETENTION = Retention()
BACKOFF = BackoffText()
DURATION = Duration()
POINT_IN_TIME = PointInTime()


def retry_options(command: Callable) -> Callable:
    """--max-delivery-attempts and --backoff: a group's retry policy (each unset: the server's default)."""
    command = click.option(
        "--backoff",
        type=BACKOFF,
        help="Wait before a redelivery after a failed push call or a nack: exponential:INITIAL,MULTIPLIER,MAX "
        "(exponential:1s,2,5m) or customized:D1,D2,... (customized:1s,5s,1m) [default: the server's, RocketMQ's "
        "1s 5s 10s 30s 1m 2m ... 2h].",
    )(command)
    return click.option(
        "--max-delivery-attempts",
        type=click.IntRange(1, 1000),
        help="Deliveries of a message before it goes to %DLQ%<group> [default: the server's, 16].",
    )(command)


yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


def output_option(json_help: str) -> Callable:
    """`--output/-o json|raw` of the commands that print messages: `json_help` says what a JSON line holds."""
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["json", "raw"]),
        default="json",
        show_default=True,
        help=f"json: {json_help}; raw: the body alone, one per line.",
    )


def confirm(question: str, yes: bool) -> None:
    """Ask before deleting something, unless --yes was given; off a terminal --yes is required."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError("stdin is not a terminal: pass --yes to confirm")
    click.confirm(question, abort=True)


def deleting(
    argument: str, what: str, question: str
) -> Callable[[Callable[[HttpClient, str], object]], Callable[..., None]]:
    """Make a function that deletes one thing, `delete(client, name)`, the body of a `delete ARGUMENT [--yes]`
    command (its docstring the help): ask `question` (`{!r}`: the name) unless --yes, delete, then print
    `deleted <what> '<name>'`."""

    def decorate(delete: Callable[[HttpClient, str], object]) -> Callable[..., None]:
        @click.argument(argument)
        @yes_option
        @click.pass_obj
        @functools.wraps(delete)
        def command(client: HttpClient, yes: bool, **named: str) -> None:
            name = named[argument]
            confirm(question.format(name), yes)
            delete(client, name)
            stdout.print(f"deleted {what} {name!r}")

        return command

    return decorate
