"""The `tidemq` command imports a subcommand only when it runs it: `tidemq --help` lists every subcommand from the
summaries in tidemq/cli/__init__.py, which must say what the commands themselves say."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from tidemq.cli import SUBCOMMANDS, cli
from tidemq.cli.lazy_group import LazyCommands, Subcommand

LOADED_AFTER = """
import json, sys
from tidemq.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(name for name in sys.modules if name.startswith(("tidemq.", "pydantic", "rich")))))
"""


def modules_loaded_by(*argv: str) -> list[str]:
    """The tidemq, pydantic and rich modules a fresh interpreter has loaded after `tidemq ARGV`."""
    ran = subprocess.run(
        [sys.executable, "-c", LOADED_AFTER.format(argv=list(argv))], capture_output=True, text=True, check=True
    )
    return json.loads(ran.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_summary_is_what_its_command_says_of_itself_at_any_width(name):
    command, listed = cli.commands[name], LazyCommands(SUBCOMMANDS)
    assert command.name == name
    for limit in (20, 45, 60, 74, 1000):
        assert listed.summary(name, limit) == command.get_short_help_str(limit)


def test_help_imports_no_subcommand():
    loaded = modules_loaded_by("--help")
    assert not [
        name
        for name in loaded
        if name.startswith(("tidemq.cli.", "pydantic", "rich")) and name != "tidemq.cli.lazy_group"
    ], loaded


def test_a_subcommand_imports_its_own_module_alone():
    loaded = modules_loaded_by("spark", "--help")
    assert [name for name in loaded if name.startswith("tidemq.cli.")] == ["tidemq.cli.lazy_group", "tidemq.cli.spark"]


def test_lazy_commands_load_on_lookup_and_keep_commands_added_as_usual():
    commands = LazyCommands({"spark": Subcommand("tidemq.cli.spark:spark", "Run the Spark jobs.")})
    added = click.Command("extra", help="An extra command.")
    commands["extra"] = added
    assert list(commands) == ["spark", "extra"] and len(commands) == 2
    assert "spark" in commands and "nothing" not in commands and commands.get("nothing") is None
    assert commands.summary("spark", 45) == "Run the Spark jobs."
    assert commands.summary("extra", 45) == "An extra command."
    assert commands["spark"].name == "spark"
    del commands["spark"]
    assert list(commands) == ["extra"]
    with pytest.raises(KeyError):
        del commands["spark"]
