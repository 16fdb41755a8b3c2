"""The local AWS `TIDEMQ_LOCAL_AWS` asks for, started: the embedded moto server, or LocalStack (installed on first
use). The local servers hand `start` to `shared.aws.connect`; nothing Lambda runs can."""

from __future__ import annotations

from pathlib import Path

from devtools.moto_server import LocalAws
from shared.settings import LocalAwsMode


def start(mode: LocalAwsMode, home: Path):
    """Start the local AWS `mode` names (LocalStack with its files under `home`), stopped when this process exits."""
    if mode is LocalAwsMode.LOCALSTACK:
        from devtools.localstack import LocalStack  # only when asked for: it needs its own virtualenv

        return LocalStack(home).start()  # installs on first use, saying each step on stderr
    return LocalAws().start()
