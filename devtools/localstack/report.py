"""How the LocalStack tooling reports: a line on stderr for each step, and a failure as LocalStackError with the
end of what the failing process printed."""

from __future__ import annotations

import sys

OUTPUT_TAIL_LINES = 30


class LocalStackError(RuntimeError):
    """LocalStack could not be installed, started or stopped; the message says which step and why."""


def say(what: str) -> None:
    print(f"localstack: {what}", file=sys.stderr, flush=True)


def tail(text: str, lines: int = OUTPUT_TAIL_LINES, width: int = 300) -> str:
    """The last `lines` lines of `text`, each cut to `width` characters (pip lists every version on one line)."""
    return "\n".join(
        line if len(line) <= width else line[:width] + " ..." for line in text.strip().splitlines()[-lines:]
    )
