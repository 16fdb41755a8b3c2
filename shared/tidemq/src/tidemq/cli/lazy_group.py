"""A click group whose subcommands are imported when first used (click's LazyGroup pattern), so that `tidemq topic
create` loads the topic commands alone and `tidemq --help` none of them.

Each subcommand is named by where it is defined (`module:attribute`) and by its summary, the line `--help` shows
beside it: the first sentence of its help text (tests/unit/test_cli_lazy.py checks each against the command).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from importlib import import_module
from typing import Any, NamedTuple

import click


class Subcommand(NamedTuple):
    location: str  # "package.module:attribute"
    summary: str


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's subcommands by name, each imported from its location the first time it is looked up; commands
    added as usual (`add_command`) are kept as they are."""

    def __init__(self, lazy: Mapping[str, Subcommand]) -> None:
        self.lazy = dict(lazy)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            module, _, attribute = self.lazy[name].location.partition(":")  # KeyError: no such command
            command = self._loaded[name] = getattr(import_module(module), attribute)
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self.lazy.pop(name, None)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.lazy.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self.lazy or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self.lazy, *self._loaded]))

    def __len__(self) -> int:
        return len(self.lazy.keys() | self._loaded.keys())

    def summary(self, name: str, limit: int) -> str:
        """The line `--help` shows for subcommand `name`, at most `limit` characters, importing nothing."""
        stand_in = click.Command(name, help=self.lazy[name].summary) if name in self.lazy else self[name]
        return stand_in.get_short_help_str(limit)


class LazyGroup(click.Group):
    """A click.Group whose `lazy_subcommands` (name -> Subcommand) are imported when one is run, or its own help
    asked for; the group's help lists them by their summaries."""

    def __init__(self, *args: Any, lazy_subcommands: Mapping[str, Subcommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = self._lazy = LazyCommands(lazy_subcommands)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click.Group lists its subcommands (sorted, each with its short help, fitted to the width)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        with formatter.section("Commands"):
            formatter.write_dl([(name, self._lazy.summary(name, limit)) for name in names])
