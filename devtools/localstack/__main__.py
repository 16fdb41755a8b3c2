"""`python -m devtools.localstack install`: the first-use setup (a few minutes the first time; then instant);
`python -m devtools.localstack serve`: LocalStack in the foreground, printing its endpoint, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from .install import install
from .report import LocalStackError
from .server import LocalStack


def main(argv: list[str] | None = None) -> None:
    """`install`: the first-use setup; `serve`: LocalStack in the foreground until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m devtools.localstack", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="install LocalStack and DynamoDB Local for offline use (idempotent)")
    serve = commands.add_parser("serve", help="run LocalStack in the foreground, printing its endpoint")
    serve.add_argument("--home", type=Path, help="its files go under HOME/localstack (default: TIDEMQ_HOME)")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "install":
            install()
            return
        if arguments.home is None:
            from shared.settings import get_settings

            arguments.home = get_settings().home
        arguments.home.mkdir(parents=True, exist_ok=True)
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        with LocalStack(arguments.home) as localstack:
            print(f"AWS_ENDPOINT_URL={localstack.endpoint}", flush=True)
            try:
                while not stopping and localstack.running:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            if not stopping and not localstack.running:
                raise LocalStackError(f"LocalStack exited; {localstack.log_path} ends:\n{localstack.log_tail()}")
    except LocalStackError as error:
        sys.exit(f"localstack: {error}")


if __name__ == "__main__":
    main()
